/* Hardware counters (retired instructions, cycles) through PAPI, for the
 * per-phase performance report.
 *
 * Counters are optional: a build without PAPI, a VM without a PMU, or a
 * kernel that forbids perf events all leave the API working and report
 * "unavailable" with the reason, so a run carries on with timers only.
 * Counts cover the calling thread only (PAPI's default), not its OpenMP
 * workers.
 */
#ifndef FABULA_MONITOR_COUNTERS_H
#define FABULA_MONITOR_COUNTERS_H

/* Initialises PAPI and probes PAPI_TOT_INS and PAPI_TOT_CYC. When counters
 * cannot be used, prints once (if `verbose`) "fabula: PAPI: no hardware
 * counters available here (<reason>); continuing with timers only".
 * Calling it again does nothing. */
void counters_init(int verbose);

/* 1 when counters_start/counters_stop measure; 0 otherwise. */
int counters_available(void);

/* Why counters are unavailable ("" when they are, "not initialised" before
 * counters_init). */
const char *counters_unavailable_reason(void);

/* Starts counting; does nothing when unavailable. */
void counters_start(void);

/* Stops counting and stores the counts since counters_start; returns 1.
 * Returns 0 and leaves *instructions and *cycles untouched when counters
 * are unavailable or were not started. */
int counters_stop(long long *instructions, long long *cycles);

#endif
