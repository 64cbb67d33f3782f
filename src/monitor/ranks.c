#include "monitor/ranks.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

const char *monitor_group_name(int g)
{
    static const char *const names[MONITOR_NGROUPS] = {"dp", "tp", "ep", "pp"};
    return g >= 0 && g < MONITOR_NGROUPS ? names[g] : "?";
}

void rank_monitor_init(rank_monitor_t *m, comm_t *world)
{
    memset(m, 0, sizeof *m);
    m->rank = comm_rank(world);
    m->world = comm_size(world);
    if (m->rank == 0) {
        m->all = fb_calloc((size_t)m->world, sizeof *m->all);
        m->scratch = fb_calloc((size_t)m->world, sizeof *m->scratch);
    }
}

void rank_monitor_free(rank_monitor_t *m)
{
    free(m->all);
    free(m->scratch);
    memset(m, 0, sizeof *m);
}

static void span_add(span_sums_t *a, const span_sums_t *b)
{
    for (int p = 0; p < PHASE_COUNT; p++)
        a->s[p] += b->s[p];
    a->step_time += b->step_time;
    a->busy += b->busy;
    a->steps += b->steps;
    a->cpu += b->cpu;
    for (int g = 0; g < MONITOR_NGROUPS; g++)
        a->group_wait[g] += b->group_wait[g];
    a->threads = b->threads;
    for (int p = 0; p < PHASE_COUNT; p++)
        counter_sums_add(&a->ctr[p], &b->ctr[p]);
    /* counting only ever switches off: the last step says if the sums hold */
    a->counted = b->counted;
    a->llc = b->llc;
    a->team_threads = b->team_threads;
}

void rank_monitor_add(rank_monitor_t *m, const phase_times_t *t, const rank_step_extra_t *x)
{
    span_sums_t *s = &m->rec.step;
    memcpy(s->s, t->s, sizeof s->s);
    s->cpu = x ? x->cpu : 0.0;
    for (int g = 0; g < MONITOR_NGROUPS; g++)
        s->group_wait[g] = x ? x->group_wait[g] : 0.0;
    s->threads = x ? x->threads : 0;
    s->step_time = t->step_time;
    s->busy = t->busy;
    s->steps = 1;
    memcpy(s->ctr, t->ctr, sizeof s->ctr);
    s->counted = t->counted;
    s->llc = t->llc;
    s->team_threads = t->team_threads;
    span_add(&m->rec.interval, s);
    span_add(&m->rec.total, s);
}

/* which: 0 step, 1 interval, 2 total */
static const span_sums_t *pick(const rank_record_t *r, int which)
{
    return which == 0 ? &r->step : which == 1 ? &r->interval : &r->total;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[n] (n >= 1), sorting v: the one rank in the middle says
 * where most ranks are, which the mean of a few ranks with one straggler
 * does not. */
static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void over_ranks(const rank_record_t *all, int world, int which, double *scratch, span_over_ranks_t *o)
{
    memset(o, 0, sizeof *o);
    o->counted = o->llc = 1;
    int team = 1, cpu_known = 1;
    for (int r = 0; r < world; r++) {
        const span_sums_t *s = pick(&all[r], which);
        for (int g = 0; g < MONITOR_NGROUPS; g++)
            o->group_wait_mean[g] += s->group_wait[g] / world;
        o->blocked_mean += (s->s[PHASE_COMM_WAIT] + s->s[PHASE_IMBALANCE]) / world;
        /* the compute phases hold no wait, no read and no save: a process
         * that had its cores spent threads x their time in CPU seconds (the
         * rest of the step's CPU, spin-waits included, only adds to it) */
        const double compute = s->s[PHASE_FORWARD] + s->s[PHASE_BACKWARD] + s->s[PHASE_OPTIMIZER];
        const double share = compute > 0 && s->threads > 0 ? s->cpu / (compute * s->threads) : -1.0;
        cpu_known &= share >= 0;
        if (r == 0 || share < o->cpu_share_min) {
            o->cpu_share_min = share;
            o->cpu_share_min_rank = r;
        }
        if (r == 0 || share > o->cpu_share_max)
            o->cpu_share_max = share;
        o->counted &= s->counted != 0;
        o->llc &= s->llc != 0;
        team &= s->team_threads > 0;
        o->team_threads += (int)s->team_threads;
        for (int p = 0; p < PHASE_COUNT; p++)
            counter_sums_add(&o->ctr[p], &s->ctr[p]);
        for (int p = 0; p < PHASE_COUNT; p++) {
            o->mean[p] += s->s[p] / world;
            if (r == 0 || s->s[p] < o->min[p])
                o->min[p] = s->s[p];
            if (r == 0 || s->s[p] > o->max[p]) {
                o->max[p] = s->s[p];
                o->max_rank[p] = r;
            }
        }
        o->step_mean += s->step_time / world;
        o->busy_mean += s->busy / world;
        if (r == 0 || s->step_time < o->step_min)
            o->step_min = s->step_time;
        if (r == 0 || s->step_time > o->step_max)
            o->step_max = s->step_time;
        if (r == 0 || s->busy < o->busy_min)
            o->busy_min = s->busy;
        if (r == 0 || s->busy > o->busy_max) {
            o->busy_max = s->busy;
            o->slowest_rank = r;
        }
    }
    for (int p = 0; p < PHASE_COUNT; p++) {
        for (int r = 0; r < world; r++)
            scratch[r] = pick(&all[r], which)->s[p];
        o->median[p] = median_of(scratch, world);
    }
    if (!cpu_known)
        o->cpu_share_min = o->cpu_share_max = -1.0;
    o->llc &= o->counted;
    o->team_threads = o->counted && team ? o->team_threads : 0;
    o->steps = pick(&all[0], which)->steps;
}

static void gpu_over_ranks(const rank_record_t *all, int world, ranks_summary_t *o)
{
    int n = 0;
    for (int r = 0; r < world; r++) {
        const nvml_sample_t *g = &all[r].gpu;
        if (g->util < 0 && g->mem_used < 0)
            continue;
        if (n == 0) {
            o->gpu_util_min = g->util;
            o->gpu_sm_mhz_min = g->sm_mhz;
        }
        o->gpu_util_min = g->util < o->gpu_util_min ? g->util : o->gpu_util_min;
        o->gpu_util_mean += g->util;
        o->gpu_temp_max = g->temp_c > o->gpu_temp_max ? g->temp_c : o->gpu_temp_max;
        o->gpu_power_sum += g->power_w > 0 ? g->power_w : 0.0;
        o->gpu_sm_mhz_min = g->sm_mhz < o->gpu_sm_mhz_min ? g->sm_mhz : o->gpu_sm_mhz_min;
        o->gpu_mem_used_max = g->mem_used > o->gpu_mem_used_max ? g->mem_used : o->gpu_mem_used_max;
        o->gpu_mem_total = g->mem_total > o->gpu_mem_total ? g->mem_total : o->gpu_mem_total;
        n++;
    }
    o->have_gpu = n > 0;
    if (n)
        o->gpu_util_mean /= n;
}

void rank_monitor_gather(rank_monitor_t *m, comm_t *world, double rss_peak, double device_peak,
                         const nvml_sample_t *gpu, ranks_summary_t *out)
{
    m->rec.rss_peak = rss_peak;
    m->rec.device_peak = device_peak;
    if (gpu)
        m->rec.gpu = *gpu;
    else
        m->rec.gpu = (nvml_sample_t){-1, -1, -1, -1, -1, -1};
    comm_gather(world, &m->rec, sizeof m->rec, m->all, 0);
    memset(&m->rec.interval, 0, sizeof m->rec.interval);
    if (m->rank != 0)
        return;
    memset(out, 0, sizeof *out);
    out->world = m->world;
    over_ranks(m->all, m->world, 0, m->scratch, &out->step);
    over_ranks(m->all, m->world, 1, m->scratch, &out->interval);
    over_ranks(m->all, m->world, 2, m->scratch, &out->total);
    for (int r = 0; r < m->world; r++) {
        if (r == 0 || m->all[r].rss_peak > out->rss_max) {
            out->rss_max = m->all[r].rss_peak;
            out->rss_max_rank = r;
        }
        if (r == 0 || m->all[r].device_peak > out->device_max) {
            out->device_max = m->all[r].device_peak;
            out->device_max_rank = r;
        }
    }
    gpu_over_ranks(m->all, m->world, out);
}
