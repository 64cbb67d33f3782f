/* PAPI hardware counters with a graceful "unavailable" path. */
#include "build_config.h"

#include "monitor/counters.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

#ifdef HAVE_PAPI
#include <omp.h>
#include <papi.h>
#include <pthread.h>
#endif

static int initialised;
static int available;
static int running;
static int llc;
static int team_threads;
static char reason[1200] = "not initialised";

/* Records why counters are off; the message is printed once by init. */
static void set_unavailable(const char *what, const char *detail)
{
    available = 0;
    team_threads = 0;
    snprintf(reason, sizeof reason, "%.100s%s%.1000s", what, detail && detail[0] ? ": " : "", detail ? detail : "");
}

#ifdef HAVE_PAPI
static char llc_reason[200];
static char team_reason[300];
static int nevents;
static int events[COUNTER_EVENTS];
static const char *event_names[COUNTER_EVENTS] = {"PAPI_TOT_INS", "PAPI_TOT_CYC", "PAPI_L3_TCM"};
static int event_set = PAPI_NULL;

/* A team thread other than the main one: its own event set, made by it
 * (PAPI binds an event set to the thread that created it). */
typedef struct worker {
    int set;
    int started;
    pthread_t owner;
    const char *failed;     /* the call that failed, NULL while all is well */
    int err;                /* its PAPI code, or PAPI_OK for a check of ours */
} worker_t;

static worker_t *workers;   /* [team_n]; slot 0 is the main thread, unused */
static long long (*worker_v)[COUNTER_EVENTS]; /* [team_n]: the last stop's counts */
static int team_n;
static int team_running;

/* PAPI tells threads apart by this; pthread_self, not omp_get_thread_num,
 * so that a team whose OS threads changed is noticed, not mixed up. */
static unsigned long thread_id(void) { return (unsigned long)pthread_self(); }

static void team_off(const char *what, const char *detail)
{
    team_threads = 0;
    snprintf(team_reason, sizeof team_reason, "%.120s%s%.170s", what, detail && detail[0] ? ": " : "",
             detail ? detail : "");
}

/* The first worker that failed, as team_off's reason; 0 when none did. */
static int team_failed(void)
{
    for (int t = 1; t < team_n; t++) {
        const worker_t *w = &workers[t];
        if (!w->failed)
            continue;
        char what[120];
        snprintf(what, sizeof what, "OpenMP thread %d: %s", t, w->failed);
        team_off(what, w->err != PAPI_OK ? PAPI_strerror(w->err) : NULL);
        return 1;
    }
    return 0;
}

static void worker_fail(worker_t *w, const char *call, int err)
{
    w->failed = call;
    w->err = err;
}

/* In a parallel region of team_n threads: 1 when it really has team_n and
 * the same OS threads as at set-up (the assumption of counters.h). */
static int team_region_ok(int t, int nthreads)
{
    worker_t *w = &workers[t];
    if (nthreads != team_n) {
        if (t == 0)
            worker_fail(&workers[team_n > 1 ? 1 : 0], "the parallel region did not get the whole team", PAPI_OK);
        return 0;
    }
    if (t > 0 && !pthread_equal(w->owner, pthread_self())) {
        worker_fail(w, "another OS thread than the one that created its event set", PAPI_OK);
        return 0;
    }
    return 1;
}

static void worker_setup(worker_t *w)
{
    w->set = PAPI_NULL;
    w->owner = pthread_self();
    int ret = PAPI_register_thread();
    if (ret != PAPI_OK) {
        worker_fail(w, "PAPI_register_thread", ret);
        return;
    }
    ret = PAPI_create_eventset(&w->set);
    if (ret != PAPI_OK) {
        worker_fail(w, "PAPI_create_eventset", ret);
        return;
    }
    for (int e = 0; e < nevents; e++)
        if ((ret = PAPI_add_event(w->set, events[e])) != PAPI_OK) {
            worker_fail(w, "PAPI_add_event", ret);
            return;
        }
}

/* Stops every worker that runs; their counts land in worker_v[t]. */
static void team_stop_all(void)
{
#pragma omp parallel num_threads(team_n)
    {
        const int t = omp_get_thread_num();
        worker_t *w = &workers[t];
        if (t > 0 && w->started && team_region_ok(t, omp_get_num_threads())) {
            long long v[COUNTER_EVENTS] = {0};
            const int ret = PAPI_stop(w->set, v);
            w->started = 0;
            if (ret != PAPI_OK)
                worker_fail(w, "PAPI_stop", ret);
            else
                memcpy(worker_v[t], v, sizeof v);
        }
    }
    team_running = 0;
}

/* Starts every worker; on a failure stops those that started. 1: all run. */
static int team_start_all(void)
{
    if (omp_in_parallel()) {
        team_off("counters_start called inside a parallel region", NULL);
        return 0;
    }
    if (omp_get_max_threads() != team_n) {
        team_off("the OpenMP team size changed since counters_init", NULL);
        return 0;
    }
#pragma omp parallel num_threads(team_n)
    {
        const int t = omp_get_thread_num();
        worker_t *w = &workers[t];
        if (team_region_ok(t, omp_get_num_threads()) && t > 0) {
            const int ret = PAPI_start(w->set);
            if (ret != PAPI_OK)
                worker_fail(w, "PAPI_start", ret);
            else
                w->started = 1;
        }
    }
    team_running = 1;
    if (!team_failed())
        return 1;
    team_stop_all();
    return 0;
}

/* The team's event sets, made and tried once. Off (with team_reason) when
 * PAPI cannot count the team; the main thread counts on regardless. */
static void team_probe(void)
{
    team_n = omp_get_max_threads();
    if (team_n < 1)
        team_n = 1;
    workers = fb_calloc((size_t)team_n, sizeof *workers);
    worker_v = fb_calloc((size_t)team_n, sizeof *worker_v);
    team_threads = team_n;
    if (team_n == 1)
        return;
#pragma omp parallel num_threads(team_n)
    {
        const int t = omp_get_thread_num();
        if (omp_get_num_threads() != team_n) {
            if (t == 0)
                worker_fail(&workers[1], "the parallel region did not get the whole team", PAPI_OK);
        } else if (t > 0) {
            worker_setup(&workers[t]);
        }
    }
    if (team_failed())
        return;
    if (!team_start_all())
        return;
    team_stop_all();
    team_failed();
}

/* Every step that can fail on a machine without a usable PMU is checked;
 * a failure turns the counters off instead of ending the run. */
static void probe(void)
{
    int ret = PAPI_library_init(PAPI_VER_CURRENT);
    if (ret != PAPI_VER_CURRENT) {
        set_unavailable("PAPI_library_init", ret > 0 ? "library/header version mismatch" : PAPI_strerror(ret));
        return;
    }
    int nctr = PAPI_num_cmp_hwctrs(0);
    if (nctr <= 0) {
        const PAPI_component_info_t *ci = PAPI_get_component_info(0);
        const char *why = ci && ci->disabled && ci->disabled_reason[0] ? ci->disabled_reason
                                                                         : "the CPU component reports 0 counters";
        set_unavailable("no counters in the CPU component", why);
        return;
    }
    /* before any event set exists, as PAPI asks */
    const int thread_ret = PAPI_thread_init(thread_id);
    const int wanted[COUNTER_EVENTS] = {PAPI_TOT_INS, PAPI_TOT_CYC, PAPI_L3_TCM};
    char what[64];
    for (int i = 0; i < COUNTER_LLC; i++) {
        ret = PAPI_query_event(wanted[i]);
        if (ret != PAPI_OK) {
            snprintf(what, sizeof what, "event %s", event_names[i]);
            set_unavailable(what, PAPI_strerror(ret));
            return;
        }
    }
    ret = PAPI_create_eventset(&event_set);
    if (ret != PAPI_OK) {
        set_unavailable("PAPI_create_eventset", PAPI_strerror(ret));
        return;
    }
    for (int i = 0; i < COUNTER_LLC; i++) {
        ret = PAPI_add_event(event_set, wanted[i]);
        if (ret != PAPI_OK) {
            snprintf(what, sizeof what, "PAPI_add_event(%s)", event_names[i]);
            set_unavailable(what, PAPI_strerror(ret));
            return;
        }
        events[nevents++] = wanted[i];
    }
    /* LLC misses only where the preset exists and fits beside the others */
    ret = PAPI_query_event(PAPI_L3_TCM);
    if (ret == PAPI_OK)
        ret = PAPI_add_event(event_set, PAPI_L3_TCM);
    if (ret == PAPI_OK) {
        events[nevents++] = PAPI_L3_TCM;
        llc = 1;
    } else {
        snprintf(llc_reason, sizeof llc_reason, "%.180s", PAPI_strerror(ret));
    }
    /* Some kernels accept the event set and refuse to count at start. */
    long long v[COUNTER_EVENTS];
    ret = PAPI_start(event_set);
    if (ret != PAPI_OK) {
        set_unavailable("PAPI_start", PAPI_strerror(ret));
        return;
    }
    ret = PAPI_stop(event_set, v);
    if (ret != PAPI_OK) {
        set_unavailable("PAPI_stop", PAPI_strerror(ret));
        return;
    }
    available = 1;
    reason[0] = '\0';
    if (thread_ret != PAPI_OK)
        team_off("PAPI_thread_init", PAPI_strerror(thread_ret));
    else
        team_probe();
}

/* A counter failure after a good probe: warn once, then carry on without. */
static void fail_at_runtime(const char *call, int ret)
{
    set_unavailable(call, PAPI_strerror(ret));
    fb_warn("PAPI: %s; hardware counters switched off for the rest of the run", reason);
}

/* The team failed after a good probe: one warning, the main thread goes on. */
static void team_fail_at_runtime(void)
{
    fb_warn("PAPI: %s; counting the main thread only for the rest of the run", team_reason);
}

static void print_available(void)
{
    char llc_note[260] = "";
    char team_note[360];
    if (!llc)
        snprintf(llc_note, sizeof llc_note, "; no LLC misses (PAPI_L3_TCM: %s)", llc_reason);
    if (team_threads == 1)
        snprintf(team_note, sizeof team_note, "the main thread (the whole OpenMP team of 1)");
    else if (team_threads > 1)
        snprintf(team_note, sizeof team_note, "the main thread and the OpenMP team of %d", team_threads);
    else
        snprintf(team_note, sizeof team_note, "the main thread only (not the OpenMP team: %s)", team_reason);
    printf("fabula: PAPI: counting PAPI_TOT_INS, PAPI_TOT_CYC%s per phase on %s%s\n", llc ? ", PAPI_L3_TCM" : "",
           team_note, llc_note);
}
#endif

void counters_init(int verbose)
{
    if (initialised)
        return;
    initialised = 1;
#ifdef HAVE_PAPI
    probe();
    if (available && verbose)
        print_available();
#else
    set_unavailable("built without PAPI", NULL);
#endif
    if (!available && verbose)
        printf("fabula: PAPI: no hardware counters available here (%s); continuing with timers only\n", reason);
}

int counters_available(void) { return available; }

const char *counters_unavailable_reason(void) { return reason; }

int counters_llc(void) { return available && llc; }

int counters_team_threads(void) { return available ? team_threads : 0; }

void counters_start(void)
{
    if (!available || running)
        return;
#ifdef HAVE_PAPI
    /* the team first, so that the main thread's counts leave its region out */
    if (team_threads > 1 && !team_start_all())
        team_fail_at_runtime();
    int ret = PAPI_start(event_set);
    if (ret != PAPI_OK) {
        if (team_running)
            team_stop_all();
        fail_at_runtime("PAPI_start", ret);
        return;
    }
    running = 1;
#endif
}

int counters_stop(counter_sample_t *out)
{
    if (!available || !running)
        return 0;
    running = 0;
#ifdef HAVE_PAPI
    long long v[COUNTER_EVENTS] = {0};
    int ret = PAPI_stop(event_set, v);
    if (team_running) {
        team_stop_all();
        if (team_failed())
            team_fail_at_runtime();
    }
    if (ret != PAPI_OK) {
        fail_at_runtime("PAPI_stop", ret);
        return 0;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->main, v, sizeof v);
    if (team_threads == 1) {
        memcpy(out->team, v, sizeof v);
    } else if (team_threads > 1) {
        counters_sum_team(v, (const long long (*)[COUNTER_EVENTS])(worker_v + 1), team_n - 1, out->team);
    }
    return 1;
#else
    (void)out;
    return 0;
#endif
}

void counters_sum_team(const long long main[COUNTER_EVENTS], const long long (*workers_v)[COUNTER_EVENTS],
                       int nworkers, long long team[COUNTER_EVENTS])
{
    for (int e = 0; e < COUNTER_EVENTS; e++) {
        long long s = main[e];
        for (int t = 0; t < nworkers; t++)
            s += workers_v[t][e];
        team[e] = s;
    }
}

void counter_sums_add_sample(counter_sums_t *s, const counter_sample_t *c)
{
    for (int e = 0; e < COUNTER_EVENTS; e++) {
        s->main[e] += (double)c->main[e];
        s->team[e] += (double)c->team[e];
    }
}

void counter_sums_add(counter_sums_t *a, const counter_sums_t *b)
{
    for (int e = 0; e < COUNTER_EVENTS; e++) {
        a->main[e] += b->main[e];
        a->team[e] += b->team[e];
    }
}

double counters_ipc(double instructions, double cycles) { return cycles > 0 ? instructions / cycles : -1.0; }

double counters_per_kilo_ins(double events_n, double instructions)
{
    return instructions > 0 ? 1000.0 * events_n / instructions : -1.0;
}
