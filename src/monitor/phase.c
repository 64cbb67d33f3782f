#include "monitor/phase.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "monitor/counters.h"
#include "util/timer.h"
#include "util/error.h"

static struct {
    int on, count;
    long pairs;             /* handle pairs this step */
    double pair_cost;       /* seconds per pair, measured at enable */
    double acc[PHASE_COUNT];
    counter_sums_t ctr[PHASE_COUNT];
    double t0[PHASE_COUNT], w0[PHASE_COUNT];
    double step_w0;
} st;

const char *phase_name(phase_id_t p)
{
    static const char *const names[PHASE_COUNT] = {"data",      "forward",    "backward", "comm_wait",
                                                   "optimizer", "checkpoint", "imbalance"};
    FB_ASSERT(p >= 0 && p < PHASE_COUNT);
    return names[p];
}

void phase_enable(int on)
{
    st.on = on && PHASE_TIMERS_COMPILED;
    st.count = st.on && counters_available();
    st.pair_cost = 0.0;
#ifdef FB_PHASE_TIMERS
    if (st.on) {
        /* 200 pairs on a scratch phase: what a handle pair costs here */
        const double ckpt = st.acc[PHASE_CHECKPOINT];
        const double t0 = timer_now();
        for (int i = 0; i < 200; i++) {
            phase_begin(PHASE_CHECKPOINT);
            phase_end(PHASE_CHECKPOINT);
        }
        st.pair_cost = (timer_now() - t0) / 200;
        st.acc[PHASE_CHECKPOINT] = ckpt;
    }
#endif
}

double phase_handles_cost(void) { return (double)st.pairs * st.pair_cost; }

int phase_enabled(void) { return st.on; }

#ifdef FB_PHASE_TIMERS
void phase_begin(phase_id_t p)
{
    if (!st.on)
        return;
    if (st.count && p != PHASE_CHECKPOINT)
        counters_start();
    st.pairs++;
    st.t0[p] = timer_now();
    st.w0[p] = comm_wait_seconds_total();
}

void phase_end(phase_id_t p)
{
    if (!st.on)
        return;
    double dt = timer_now() - st.t0[p];
    /* the checkpoint is I/O as a whole, its closing barrier included */
    if (p != PHASE_CHECKPOINT)
        dt -= comm_wait_seconds_total() - st.w0[p];
    st.acc[p] += dt > 0.0 ? dt : 0.0;
    counter_sample_t c;
    if (st.count && p != PHASE_CHECKPOINT && counters_stop(&c))
        counter_sums_add_sample(&st.ctr[p], &c);
}
#endif

void phase_step_begin(void)
{
    const double ckpt = st.acc[PHASE_CHECKPOINT];
    memset(st.acc, 0, sizeof st.acc);
    st.pairs = 0;
    memset(st.ctr, 0, sizeof st.ctr);
    st.acc[PHASE_CHECKPOINT] = ckpt;
    st.step_w0 = comm_wait_seconds_total();
}

void phase_step_end(double step_time, comm_t *world, phase_times_t *out)
{
    memset(out, 0, sizeof *out);
    double waits = comm_wait_seconds_total() - st.step_w0;
    if (waits > step_time)
        waits = step_time;
    const double busy = step_time - waits;
    double max_busy = busy;
    if (world && comm_size(world) > 1)
        comm_allreduce(world, &max_busy, 1, COMM_F64, COMM_MAX);
    double imb = max_busy - busy;
    imb = imb < 0.0 ? 0.0 : imb > waits ? waits : imb;
    memcpy(out->s, st.acc, sizeof out->s);
    out->s[PHASE_IMBALANCE] = imb;
    out->s[PHASE_COMM_WAIT] = waits - imb;
    out->step_time = step_time;
    out->waits = waits;
    out->busy = busy;
    /* a runtime PAPI failure switches counting off for good */
    out->counted = st.count && counters_available();
    out->llc = out->counted && counters_llc();
    out->team_threads = out->counted ? counters_team_threads() : 0;
    memcpy(out->ctr, st.ctr, sizeof out->ctr);
    st.acc[PHASE_CHECKPOINT] = 0.0;
}

void phase_sleep(double seconds)
{
    if (!(seconds > 0.0))
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        if (errno != EINTR)
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "nanosleep", strerror(errno));
}
