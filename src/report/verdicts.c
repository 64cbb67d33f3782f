/* The collapsed verdict table (report/verdicts.h). */
#include "report/verdicts.h"

#include <stdlib.h>
#include <string.h>

#include "report/html.h"
#include "util/error.h"

enum { MAX_ROWS = 60 };

static const char *field(json_t *bn, const char *key)
{
    json_t *t = json_object_get(bn, key);
    return t && json_is_string(t) ? json_string_value(t) : "-";
}

/* Whether a and b are equal once each run of digits and dots that holds a
 * digit is taken as one placeholder: "share 41.1% on rank 0" and "share
 * 42.2% on rank 1" say the same. */
static int same_but_numbers(const char *a, const char *b)
{
    static const char num[] = "0123456789.";
    for (;;) {
        const size_t na = strspn(a, num), nb = strspn(b, num);
        const int da = strcspn(a, "0123456789") < na, db = strcspn(b, "0123456789") < nb;
        if (da || db) {
            if (!(da && db))
                return 0;
            a += na;
            b += nb;
            continue;
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        a++;
        b++;
    }
}

static int same_verdict(json_t *x, json_t *y)
{
    static const char *const keys[] = {"verdict", "evidence", "advice"};
    for (int k = 0; k < 3; k++)
        if (!same_but_numbers(field(x, keys[k]), field(y, keys[k])))
            return 0;
    return 1;
}

void verdict_table(strbuf_t *b, const report_run_t *r)
{
    /* rows as [first, last] record indices and how many verdicts each holds */
    size_t *first = fb_malloc(r->nsteps * sizeof *first), *last = fb_malloc(r->nsteps * sizeof *last);
    size_t *count = fb_malloc(r->nsteps * sizeof *count);
    size_t rows = 0, verdicts = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        json_t *bn = report_get(r->steps[i], "bottleneck");
        if (!bn || !json_is_object(bn))
            continue;
        verdicts++;
        if (rows && same_verdict(report_get(r->steps[last[rows - 1]], "bottleneck"), bn)) {
            last[rows - 1] = i;
            count[rows - 1]++;
        } else {
            first[rows] = last[rows] = i;
            count[rows++] = 1;
        }
    }
    if (!rows) {
        html_note(b, "No \"bottleneck\" field in metrics.jsonl: no verdicts.");
    } else {
        sb_printf(b, "<table class=\"verdicts\">\n<tr><th>step</th><th>verdict</th><th>evidence (the last of the "
                     "row's)</th><th>advice</th></tr>\n");
        for (size_t k = rows > MAX_ROWS ? rows - MAX_ROWS : 0; k < rows; k++) {
            double s0 = 0, s1 = 0;
            report_num(r->steps[first[k]], "step", &s0);
            report_num(r->steps[last[k]], "step", &s1);
            if (count[k] == 1)
                sb_printf(b, "<tr><td>%.0f</td>", s0);
            else /* U+2013, an en dash, in UTF-8 */
                sb_printf(b, "<tr><td>steps %.0f\xe2\x80\x93%.0f (%zu gathers)</td>", s0, s1, count[k]);
            json_t *bn = report_get(r->steps[last[k]], "bottleneck");
            static const char *const keys[] = {"verdict", "evidence", "advice"};
            for (int j = 0; j < 3; j++) {
                sb_printf(b, "<td>");
                sb_xml(b, field(bn, keys[j]));
                sb_printf(b, "</td>");
            }
            sb_printf(b, "</tr>\n");
        }
        sb_printf(b, "</table>\n");
        if (rows > MAX_ROWS)
            html_note(b, "The last %d of %zu rows (%zu verdicts).", MAX_ROWS, rows, verdicts);
    }
    free(first);
    free(last);
    free(count);
}
