#include "train/eta.h"

#include <stdlib.h>
#include <string.h>

#include "loader/balance.h"
#include "loader/curriculum.h"
#include "util/error.h"

/* One length class's samples, sorted, with prefix sums of len and len^2. */
typedef struct lengths {
    int64_t n;
    int64_t *len;
    double *s1, *s2;            /* [n + 1] */
} lengths_t;

static int by_len(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void lengths_build(lengths_t *l)
{
    qsort(l->len, (size_t)l->n, sizeof *l->len, by_len);
    l->s1 = fb_calloc((size_t)l->n + 1, sizeof *l->s1);
    l->s2 = fb_calloc((size_t)l->n + 1, sizeof *l->s2);
    for (int64_t i = 0; i < l->n; i++) {
        l->s1[i + 1] = l->s1[i] + (double)l->len[i];
        l->s2[i + 1] = l->s2[i] + (double)l->len[i] * (double)l->len[i];
    }
}

/* Mean over the class of min(len, cap) in *tokens, and of its cost. */
static double lengths_mean_cost(const lengths_t *l, int cap, double c, double *tokens)
{
    int64_t lo = 0, hi = l->n; /* first sample not shorter than cap */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (l->len[mid] < cap)
            lo = mid + 1;
        else
            hi = mid;
    }
    const double cut = (double)(l->n - lo);
    *tokens = (l->s1[lo] + cut * cap) / (double)l->n;
    return (l->s1[lo] + c * l->s2[lo] + cut * balance_cost(cap, c)) / (double)l->n;
}

/* Where an empty class's share goes: the nearest length class first
 * (src/loader/curriculum.h). */
static const int pass_order[LOADER_NCLASSES][LOADER_NCLASSES - 1] = {{1, 2}, {0, 2}, {1, 0}};

typedef struct schedule {
    const config_t *cfg;
    int classes;                /* 1 without the curriculum */
    lengths_t cls[LOADER_NCLASSES];
    double micro_batches, capacity;
} schedule_t;

static double expected_cost(const schedule_t *sc, int cap, const double mix_in[LOADER_NCLASSES])
{
    const config_t *cfg = sc->cfg;
    const double c = cfg->loader.attention_cost;
    double mix[LOADER_NCLASSES] = {1.0, 0.0, 0.0};
    if (sc->classes > 1) {
        memcpy(mix, mix_in, sizeof mix);
        for (int k = 0; k < LOADER_NCLASSES; k++) {
            if (sc->cls[k].n > 0 || mix[k] == 0.0)
                continue;
            for (int j = 0; j < LOADER_NCLASSES - 1; j++)
                if (sc->cls[pass_order[k][j]].n > 0) {
                    mix[pass_order[k][j]] += mix[k];
                    break;
                }
            mix[k] = 0.0;
        }
    }
    double cost = 0.0, tokens = 0.0, sum = 0.0;
    for (int k = 0; k < sc->classes; k++) {
        if (sc->cls[k].n == 0 || mix[k] <= 0.0)
            continue;
        double t;
        cost += mix[k] * lengths_mean_cost(&sc->cls[k], cap, c, &t);
        tokens += mix[k] * t;
        sum += mix[k];
    }
    if (sum <= 0.0)
        return 0.0;
    cost *= cfg->train_batch_size / sum;
    tokens *= cfg->train_batch_size / sum;
    /* what does not fit the step's micro-batches waits for the next step */
    const double room = sc->micro_batches * sc->capacity;
    return room > 0 && tokens > room ? cost * room / tokens : cost;
}

void eta_init(eta_t *e, const config_t *cfg, const int64_t *lens, int64_t n)
{
    memset(e, 0, sizeof *e);
    e->steps = cfg->run.steps;
    schedule_t sc = {.cfg = cfg, .classes = cfg->loader.curriculum ? LOADER_NCLASSES : 1};
    sc.micro_batches = cfg->micro_batch > 0 ? (double)cfg->train_batch_size / cfg->micro_batch : 0.0;
    sc.capacity = (double)cfg->loader.max_tokens_per_batch;
    for (int k = 0; k < sc.classes; k++)
        sc.cls[k].len = fb_malloc(((size_t)n + 1) * sizeof *sc.cls[k].len);
    for (int64_t i = 0; i < n; i++) {
        const int k = sc.classes > 1 ? curriculum_class(&cfg->loader, lens[i]) : 0;
        sc.cls[k].len[sc.cls[k].n++] = lens[i];
    }
    for (int k = 0; k < sc.classes; k++)
        lengths_build(&sc.cls[k]);
    /* one segment per run of steps with the same cap and the same phase */
    int cap_prev = -1;
    const loader_phase_t *ph_prev = NULL;
    int cap_seg = 0;
    for (long s = 0; s < e->steps; s++) {
        const int cap = curriculum_max_len(&cfg->loader, cfg->data.seq_len, s);
        const loader_phase_t *ph =
            sc.classes > 1 ? curriculum_phase(&cfg->loader, (double)s / (double)e->steps) : NULL;
        if (s > 0 && cap == cap_prev && ph == ph_prev)
            continue;
        if (e->nseg == cap_seg) {
            cap_seg = cap_seg ? 2 * cap_seg : 16;
            e->seg = fb_realloc(e->seg, (size_t)cap_seg * sizeof *e->seg);
        }
        static const double uniform[LOADER_NCLASSES] = {1.0, 0.0, 0.0};
        e->seg[e->nseg++] = (eta_segment_t){s, expected_cost(&sc, cap, ph ? ph->mix : uniform)};
        cap_prev = cap;
        ph_prev = ph;
    }
    e->cum = fb_calloc((size_t)e->nseg + 1, sizeof *e->cum);
    for (int i = 0; i < e->nseg; i++) {
        const long to = i + 1 < e->nseg ? e->seg[i + 1].from : e->steps;
        e->cum[i + 1] = e->cum[i] + e->seg[i].cost * (double)(to - e->seg[i].from);
    }
    for (int k = 0; k < sc.classes; k++) {
        free(sc.cls[k].len);
        free(sc.cls[k].s1);
        free(sc.cls[k].s2);
    }
}

void eta_free(eta_t *e)
{
    free(e->seg);
    free(e->cum);
    memset(e, 0, sizeof *e);
}

/* The segment holding step s. */
static int segment_of(const eta_t *e, long s)
{
    int lo = 0, hi = e->nseg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (e->seg[mid].from <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

double eta_step_cost(const eta_t *e, long s)
{
    return e->nseg > 0 && s >= 0 && s < e->steps ? e->seg[segment_of(e, s)].cost : 0.0;
}

void eta_add(eta_t *e, double cost, double seconds)
{
    e->n += 1.0;
    e->sc += cost;
    e->st += seconds;
    e->scc += cost * cost;
    e->sct += cost * seconds;
}

double eta_cost_from(const eta_t *e, long from)
{
    if (e->nseg == 0 || from >= e->steps)
        return 0.0;
    const int i = segment_of(e, from);
    return e->cum[e->nseg] - e->cum[i] - e->seg[i].cost * (double)(from - e->seg[i].from);
}

double eta_seconds(const eta_t *e, long done, double other)
{
    if (e->n <= 0 || done >= e->steps)
        return 0.0;
    const double left = (double)(e->steps - done), mean_t = e->st / e->n, mean_c = e->sc / e->n;
    const double var = e->scc / e->n - mean_c * mean_c;
    double a = mean_t, b = 0.0;
    /* costs that varied (5% spread or more) tell the time per cost apart
     * from the time every step takes; otherwise time per step it is,
     * scaled by how the work per step changes */
    if (mean_c > 0 && var > 0.0025 * mean_c * mean_c) {
        b = (e->sct / e->n - mean_c * mean_t) / var;
        a = mean_t - b * mean_c;
        if (b < 0) {
            a = mean_t;
            b = 0.0;
        } else if (a < 0) {
            a = 0.0;
            b = e->st / e->sc;
        }
    } else if (mean_c > 0) {
        a = 0.0;
        b = mean_t / mean_c;
    }
    return a * left + b * eta_cost_from(e, done) + other * left;
}
