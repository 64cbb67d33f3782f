/* Inline SVG charts for the report: axes with round ticks, lines, stacked
 * areas and heatmaps. Coordinates are printed with one decimal: enough for a
 * screen, small for a long run. */
#include "report/svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W = 720, H = 280, ML = 64, MR = 170, MT = 28, MB = 42, MAX_POINTS = 2000, MAX_MARKS = 40,
       MAX_DOTS = 200 };

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char *svg_color(size_t i)
{
    return palette[i % (sizeof palette / sizeof *palette)];
}

/* The plotted range, in axis units: log2 x and log10 y on log axes. */
typedef struct frame {
    double x0, x1, y0, y1;
    int xlog, ylog;
} frame_t;

/* a data value in axis units; NaN where a log axis has no place for it */
static double tx(const frame_t *f, double x)
{
    return f->xlog ? (x > 0 ? log2(x) : NAN) : x;
}

static double ty(const frame_t *f, double y)
{
    return f->ylog ? (y > 0 ? log10(y) : NAN) : y;
}

/* pixel positions of data values */
static double px(const frame_t *f, double x)
{
    return ML + (f->x1 > f->x0 ? (tx(f, x) - f->x0) / (f->x1 - f->x0) : 0.5) * (W - ML - MR);
}

static double py(const frame_t *f, double y)
{
    return H - MB - (f->y1 > f->y0 ? (ty(f, y) - f->y0) / (f->y1 - f->y0) : 0.5) * (H - MT - MB);
}

/* A tick step of 1, 2 or 5 times a power of ten giving about five ticks. */
static double tick_step(double span)
{
    if (!(span > 0))
        return 1;
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_num(char *out, size_t n, double v)
{
    double a = fabs(v);
    if (a != 0 && (a >= 1e5 || a < 1e-3))
        snprintf(out, n, "%.3g", v);
    else
        snprintf(out, n, "%g", round(v * 1e6) / 1e6);
}

static void open_svg(strbuf_t *b, const char *title)
{
    sb_printf(b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
              W, H, W, H);
    sb_printf(b, "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">", ML);
    sb_xml(b, title ? title : "");
    sb_printf(b, "</text>\n");
}

static void y_tick(strbuf_t *b, const frame_t *f, double v)
{
    char t[32];
    fmt_num(t, sizeof t, v);
    sb_printf(b,
              "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
              ML, W - MR, py(f, v), py(f, v), ML - 4, py(f, v) + 4, t);
}

static void x_tick(strbuf_t *b, const frame_t *f, double v)
{
    char t[32];
    fmt_num(t, sizeof t, v);
    sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", px(f, v), H - MB + 14, t);
}

/* Round values between lo and hi (data units) about five apart. */
static void linear_y_ticks(strbuf_t *b, const frame_t *f, double lo, double hi)
{
    const double st = tick_step(hi - lo);
    for (double v = ceil(lo / st) * st; v <= hi + st * 1e-9; v += st)
        y_tick(b, f, v);
}

/* A log y axis: 1, 2 and 5 x each power of ten over a few decades, the
 * powers alone over many; within one decade those are too few, and round
 * linear steps read better. */
static void log_y_ticks(strbuf_t *b, const frame_t *f)
{
    const double span = f->y1 - f->y0;
    if (span < 1) {
        linear_y_ticks(b, f, pow(10, f->y0), pow(10, f->y1));
        return;
    }
    static const double some[] = {1, 2, 5};
    const size_t nm = span > 4 ? 1 : 3;
    for (double d = floor(f->y0); d <= ceil(f->y1); d++)
        for (size_t i = 0; i < nm; i++) {
            const double v = some[i] * pow(10, d), l = log10(v);
            if (l >= f->y0 - 1e-9 && l <= f->y1 + 1e-9)
                y_tick(b, f, v);
        }
}

static void axes(strbuf_t *b, const frame_t *f, const svg_axes_t *ax)
{
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", ML, MT,
              W - ML - MR, H - MT - MB);
    char t[32];
    if (f->ylog)
        log_y_ticks(b, f);
    else
        linear_y_ticks(b, f, f->y0, f->y1);
    if (f->xlog) { /* powers of two, every other one over a wide range */
        const double every = f->x1 - f->x0 > 10 ? 2 : 1;
        for (double k = ceil(f->x0 - 1e-9); k <= f->x1 + 1e-9; k += every)
            x_tick(b, f, pow(2, k));
    } else {
        double st = tick_step(f->x1 - f->x0);
        if (st < 1 && f->x0 >= 1)
            st = 1; /* steps and ranks are integers */
        for (double v = ceil(f->x0 / st) * st; v <= f->x1 + st * 1e-9; v += st)
            x_tick(b, f, v);
    }
    if (ax->xlabel) {
        sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - 8);
        sb_xml(b, ax->xlabel);
        sb_printf(b, "</text>\n");
    }
    if (ax->ylabel) {
        sb_printf(b, "<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\">", (MT + H - MB) / 2);
        sb_xml(b, ax->ylabel);
        sb_printf(b, "</text>\n");
    }
    if (ax->nmarks > MAX_MARKS) { /* a run requeued all along: one path, no labels, the page stays small */
        sb_printf(b, "<path class=\"marks\" stroke=\"#555\" stroke-opacity=\"0.4\" d=\"");
        for (size_t i = 0; i < ax->nmarks; i++)
            if (ax->marks[i] >= f->x0 && ax->marks[i] <= f->x1)
                sb_printf(b, "M%.1f %dV%d", px(f, ax->marks[i]), MT, H - MB);
        sb_printf(b, "\"><title>%zu times ", ax->nmarks);
        sb_xml(b, ax->mark_name ? ax->mark_name : "");
        sb_printf(b, "</title></path>\n");
        return;
    }
    for (size_t i = 0; i < ax->nmarks; i++) {
        const double x = ax->marks[i];
        if (!(x >= f->x0 && x <= f->x1))
            continue;
        fmt_num(t, sizeof t, x);
        sb_printf(b,
                  "<line class=\"mark\" data-x=\"%s\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#555\" "
                  "stroke-dasharray=\"3 3\"><title>",
                  t, px(f, x), px(f, x), MT, H - MB);
        sb_xml(b, ax->mark_name ? ax->mark_name : "");
        sb_printf(b, " %s</title></line><text x=\"%.1f\" y=\"%d\" font-size=\"9\" fill=\"#555\">", t,
                  px(f, x) + 2, MT + 10);
        sb_xml(b, ax->mark_name ? ax->mark_name : "");
        sb_printf(b, "</text>\n");
    }
}

static void legend_styled(strbuf_t *b, size_t i, const char *name, const char *color, int dashed)
{
    const int y = MT + 8 + 16 * (int)i;
    sb_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"%s/>", W - MR + 10,
              W - MR + 30, y, y, color, dashed ? " stroke-dasharray=\"4 3\"" : "");
    sb_printf(b, "<text x=\"%d\" y=\"%d\">", W - MR + 34, y + 4);
    sb_xml(b, name ? name : "");
    sb_printf(b, "</text>\n");
}

static void legend(strbuf_t *b, size_t i, const char *name, int dashed)
{
    legend_styled(b, i, name, svg_color(i), dashed);
}

static void grow(frame_t *f, double x, double y, int *any)
{
    if (!isfinite(x) || !isfinite(y))
        return;
    if (!*any) {
        f->x0 = f->x1 = x;
        f->y0 = f->y1 = y;
        *any = 1;
        return;
    }
    f->x0 = fmin(f->x0, x);
    f->x1 = fmax(f->x1, x);
    f->y0 = fmin(f->y0, y);
    f->y1 = fmax(f->y1, y);
}

static void pad(frame_t *f, int y_from_0)
{
    if (y_from_0 && f->y0 > 0)
        f->y0 = 0;
    double span = f->y1 - f->y0;
    if (!(span > 0))
        span = fabs(f->y1) > 0 ? fabs(f->y1) * 0.1 : 1;
    f->y1 += 0.05 * span;
    if (!(y_from_0 && f->y0 == 0))
        f->y0 -= 0.05 * span;
}

void svg_lines(strbuf_t *b, const svg_axes_t *ax, const svg_series_t *s, size_t ns)
{
    frame_t f = {.x0 = 0, .x1 = 1, .y0 = 0, .y1 = 1, .xlog = ax->xlog2, .ylog = ax->ylog};
    int any = 0;
    for (size_t j = 0; j < ns; j++)
        for (size_t i = 0; i < s[j].n; i++) {
            const double x = tx(&f, s[j].x[i]);
            grow(&f, x, ty(&f, s[j].y[i]), &any);
            if (s[j].lo && s[j].hi) {
                grow(&f, x, ty(&f, s[j].lo[i]), &any);
                grow(&f, x, ty(&f, s[j].hi[i]), &any);
            }
        }
    if (ax->hline_name && any)
        grow(&f, f.x0, ty(&f, ax->hline), &any);
    pad(&f, ax->y_from_0 && !ax->ylog);
    open_svg(b, ax->title);
    axes(b, &f, ax);
    if (ax->hline_name && any && isfinite(ty(&f, ax->hline))) {
        sb_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-width=\"1.5\" "
                     "stroke-dasharray=\"6 3\"/>\n",
                  ML, W - MR, py(&f, ax->hline), py(&f, ax->hline));
        legend_styled(b, ns, ax->hline_name, "#999", 1);
    }
    for (size_t j = 0; j < ns; j++) {
        sb_printf(b, "<path class=\"data\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s d=\"", svg_color(j),
                  s[j].dashed ? " stroke-dasharray=\"4 3\"" : "");
        int pen = 0, started = 0;
        /* a long run: every k-th point (and the last), a path a browser draws at once */
        const size_t k = s[j].n > MAX_POINTS ? (s[j].n + MAX_POINTS - 1) / MAX_POINTS : 1;
        for (size_t i = 0; i < s[j].n; i++) {
            if (i % k != 0 && i != s[j].n - 1)
                continue;
            if (!isfinite(tx(&f, s[j].x[i])) || !isfinite(ty(&f, s[j].y[i]))) {
                pen = 0;
                continue;
            }
            sb_printf(b, "%s%.1f %.1f", pen ? " L" : started ? " M" : "M", px(&f, s[j].x[i]), py(&f, s[j].y[i]));
            pen = started = 1;
        }
        sb_printf(b, "\"/>\n");
        /* a dot per point helps to read a few; thousands only weigh the page */
        if ((ax->points && s[j].n <= MAX_DOTS) || s[j].n == 1)
            for (size_t i = 0; i < s[j].n; i++)
                if (isfinite(tx(&f, s[j].x[i])) && isfinite(ty(&f, s[j].y[i])))
                    sb_printf(b, "<circle class=\"data\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                              px(&f, s[j].x[i]), py(&f, s[j].y[i]), svg_color(j));
        for (size_t i = 0; s[j].lo && s[j].hi && i < s[j].n; i++)
            if (isfinite(tx(&f, s[j].x[i])) && isfinite(ty(&f, s[j].lo[i])) && isfinite(ty(&f, s[j].hi[i])))
                sb_printf(b,
                          "<line class=\"spread\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"1.2\"/>\n",
                          px(&f, s[j].x[i]), px(&f, s[j].x[i]), py(&f, s[j].lo[i]), py(&f, s[j].hi[i]), svg_color(j));
        legend(b, j, s[j].name, s[j].dashed);
    }
    sb_printf(b, "</svg>\n");
}

void svg_histogram(strbuf_t *b, const svg_axes_t *ax, const double *v, size_t n)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
            finite++;
        }
    size_t nb = (size_t)ceil(sqrt((double)finite));
    nb = nb < 1 ? 1 : nb > 40 ? 40 : nb;
    if (!(hi > lo)) { /* one value (or none): one bar around it */
        nb = 1;
        lo = finite ? lo - 0.5 : 0;
        hi = finite ? hi + 0.5 : 1;
    }
    const double w = (hi - lo) / (double)nb;
    size_t counts[40] = {0}, top = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            size_t k = (size_t)((v[i] - lo) / w);
            counts[k < nb ? k : nb - 1]++;
        }
    for (size_t k = 0; k < nb; k++)
        top = counts[k] > top ? counts[k] : top;
    frame_t f = {.x0 = lo, .x1 = hi, .y0 = 0, .y1 = (double)(top ? top : 1)};
    pad(&f, 1);
    open_svg(b, ax->title);
    axes(b, &f, ax);
    char a[32], c[32];
    for (size_t k = 0; k < nb; k++) {
        const double x0 = lo + (double)k * w, x1 = k + 1 == nb ? hi : x0 + w;
        fmt_num(a, sizeof a, x0);
        fmt_num(c, sizeof c, x1);
        sb_printf(b,
                  "<rect class=\"data\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                  "fill-opacity=\"0.8\" stroke=\"#fff\"><title>%zu in [%s, %s%s</title></rect>\n",
                  px(&f, x0), py(&f, (double)counts[k]), px(&f, x1) - px(&f, x0), py(&f, 0) - py(&f, (double)counts[k]),
                  svg_color(0), counts[k], a, c, k + 1 == nb ? "]" : ")");
    }
    sb_printf(b, "</svg>\n");
}

void svg_stacked(strbuf_t *b, const svg_axes_t *ax, const double *x, size_t n, const double *const *ys,
                 const char *const *names, size_t k)
{
    frame_t f = {.x0 = 0, .x1 = 1, .y0 = 0, .y1 = 0};
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        double top = 0;
        for (size_t j = 0; j < k; j++)
            top += isfinite(ys[j][i]) ? ys[j][i] : 0;
        grow(&f, x[i], top, &any);
        grow(&f, x[i], 0, &any);
    }
    pad(&f, 1);
    open_svg(b, ax->title);
    axes(b, &f, ax);
    double *below = calloc(n ? n : 1, sizeof *below);
    if (!below)
        return;
    const size_t every = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
    for (size_t j = 0; j < k; j++) {
        sb_printf(b, "<path class=\"data\" fill=\"%s\" fill-opacity=\"0.8\" stroke=\"none\" d=\"", svg_color(j));
        for (size_t i = 0; i < n; i++) {
            double v = isfinite(ys[j][i]) ? ys[j][i] : 0;
            if (i % every == 0 || i == n - 1)
                sb_printf(b, "%s%.1f %.1f", i ? " L" : "M", px(&f, x[i]), py(&f, below[i] + v));
        }
        for (size_t i = n; i-- > 0;) {
            if (i % every == 0 || i == n - 1)
                sb_printf(b, " L%.1f %.1f", px(&f, x[i]), py(&f, below[i]));
            below[i] += isfinite(ys[j][i]) ? ys[j][i] : 0;
        }
        sb_printf(b, " Z\"/>\n");
        legend(b, j, names[j], 0);
    }
    free(below);
    sb_printf(b, "</svg>\n");
}

void svg_heatmap(strbuf_t *b, const char *title, const double *v, size_t rows, size_t cols,
                 const char *const *row_labels, const char *const *col_labels, const char *row_axis,
                 const char *col_axis)
{
    /* shaded from the smallest value to the largest: shares near 1/E
     * differ by little, and the contrast is what the eye compares */
    double vmin = INFINITY, vmax = -INFINITY;
    for (size_t i = 0; i < rows * cols; i++)
        if (isfinite(v[i])) {
            vmin = fmin(vmin, v[i]);
            vmax = fmax(vmax, v[i]);
        }
    if (!isfinite(vmin))
        vmin = vmax = 0;
    const double cw = (double)(W - ML - MR) / (cols ? cols : 1), ch = (double)(H - MT - MB) / (rows ? rows : 1);
    open_svg(b, title);
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            double t = vmax > vmin && isfinite(v[r * cols + c]) ? (v[r * cols + c] - vmin) / (vmax - vmin) : 0;
            /* white to dark blue */
            int R = (int)(255 - t * (255 - 8)), G = (int)(255 - t * (255 - 48)), B = (int)(255 - t * (255 - 107));
            sb_printf(b,
                      "<rect class=\"data\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.2f\" "
                      "fill=\"#%02x%02x%02x\"><title>%g</title></rect>\n",
                      ML + c * cw, MT + r * ch, cw + 0.05, ch + 0.05, R, G, B, v[r * cols + c]);
        }
        /* at most ~20 row labels */
        if (rows <= 20 || r % ((rows + 19) / 20) == 0) {
            sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 4, MT + (r + 0.5) * ch + 4);
            if (row_labels)
                sb_xml(b, row_labels[r]);
            else
                sb_printf(b, "%zu", r);
            sb_printf(b, "</text>\n");
        }
    }
    const size_t every = cols > 16 ? (cols + 15) / 16 : 1;
    for (size_t c = 0; c < cols; c += every) {
        sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", ML + (c + 0.5) * cw, H - MB + 14);
        if (col_labels)
            sb_xml(b, col_labels[c]);
        else
            sb_printf(b, "%zu", c);
        sb_printf(b, "</text>\n");
    }
    if (col_axis) {
        sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - 8);
        sb_xml(b, col_axis);
        sb_printf(b, "</text>\n");
    }
    if (row_axis) {
        sb_printf(b, "<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\">", (MT + H - MB) / 2);
        sb_xml(b, row_axis);
        sb_printf(b, "</text>\n");
    }
    char t[32], u[32];
    fmt_num(t, sizeof t, vmax);
    fmt_num(u, sizeof u, vmin);
    sb_printf(b, "<text x=\"%d\" y=\"%d\">darkest: %s</text>\n", W - MR + 10, MT + 12, t);
    sb_printf(b, "<text x=\"%d\" y=\"%d\">white: %s</text>\n", W - MR + 10, MT + 28, u);
    sb_printf(b, "</svg>\n");
}
