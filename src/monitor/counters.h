/* Hardware counters (retired instructions, cycles, last-level cache
 * misses) through PAPI, for the per-phase performance report.
 *
 * Counters are optional: a build without PAPI, a VM without a PMU, or a
 * kernel that forbids perf events all leave the API working and report
 * "unavailable" with the reason, so a run carries on with timers only.
 *
 * Scope: the calling (main) thread, and where PAPI allows the OpenMP team
 * too: every other thread of the team has its own event set, started and
 * stopped inside a parallel region at counters_start/counters_stop. That
 * relies on the team keeping its threads between parallel regions (the
 * same OS thread is thread k of every team of the same size: libgomp's
 * pool, with OMP_DYNAMIC false and no nesting); counters_start checks it
 * and falls back to the main thread when it does not hold.
 */
#ifndef FABULA_MONITOR_COUNTERS_H
#define FABULA_MONITOR_COUNTERS_H

enum {
    COUNTER_INS,    /* PAPI_TOT_INS */
    COUNTER_CYC,    /* PAPI_TOT_CYC */
    COUNTER_LLC,    /* PAPI_L3_TCM, where the preset exists; 0 otherwise */
    COUNTER_EVENTS
};

/* One start/stop interval. */
typedef struct counter_sample {
    long long main[COUNTER_EVENTS]; /* the calling thread */
    long long team[COUNTER_EVENTS]; /* the calling thread plus the team's others */
} counter_sample_t;

/* Sums of samples, in doubles so that they travel in the gathered record. */
typedef struct counter_sums {
    double main[COUNTER_EVENTS];
    double team[COUNTER_EVENTS];
} counter_sums_t;

/* Initialises PAPI and probes PAPI_TOT_INS, PAPI_TOT_CYC and PAPI_L3_TCM,
 * then the OpenMP team (omp_get_max_threads threads). Prints exactly one
 * line if `verbose`: "fabula: PAPI: no hardware counters available here
 * (<reason>); continuing with timers only", or what it counts and on
 * which threads (with the reason where LLC misses or the team are left
 * out). Calling it again does nothing. */
void counters_init(int verbose);

/* 1 when counters_start/counters_stop measure; 0 otherwise. */
int counters_available(void);

/* Why counters are unavailable ("" when they are, "not initialised" before
 * counters_init). */
const char *counters_unavailable_reason(void);

/* 1 when COUNTER_LLC is counted. */
int counters_llc(void);

/* Threads summed into counter_sample_t.team (the calling thread included);
 * 0 when the team is not counted (unavailable, or switched off). */
int counters_team_threads(void);

/* Starts counting; does nothing when unavailable. Call it outside any
 * parallel region, from the thread that called counters_init. */
void counters_start(void);

/* Stops counting and stores the counts since counters_start; returns 1.
 * Events not counted (LLC without the preset) are 0; team is all 0 when
 * counters_team_threads() is 0 after the call. Returns 0 and leaves *out
 * untouched when counters are unavailable or were not started. */
int counters_stop(counter_sample_t *out);

/* Pure arithmetic, tested on constructed counts. */

/* team = main + the sum of `nworkers` rows of the other threads. */
void counters_sum_team(const long long main[COUNTER_EVENTS], const long long (*workers)[COUNTER_EVENTS],
                       int nworkers, long long team[COUNTER_EVENTS]);

/* s += c, main and team. */
void counter_sums_add_sample(counter_sums_t *s, const counter_sample_t *c);
void counter_sums_add(counter_sums_t *a, const counter_sums_t *b);

/* Instructions per cycle; -1 when cycles <= 0. */
double counters_ipc(double instructions, double cycles);

/* Events per thousand instructions (LLC MPKI); -1 when instructions <= 0. */
double counters_per_kilo_ins(double events, double instructions);

#endif
