/* The hang watchdog (docs/reliability.md, "Hangs"): a thread per rank that
 * ends a training step which runs past its bound, hang_factor times the
 * median step time (at least hang_min_s; hang_first_s before a step time
 * is known). It makes no MPI call: each rank's thread writes what its rank
 * is doing (parallel/heartbeat.h) into RUN_DIR/hang/rank-R.json at half the
 * bound, and at the bound the lowest rank that wrote one reads them all,
 * names the ranks that have not arrived in the collective the others wait
 * in, writes RUN_DIR/hang.txt and hang.json, and every rank exits with
 * FB_EXIT_HUNG. Only steps are watched: start-up, evaluation and
 * checkpoints run unbounded. */
#ifndef FABULA_MONITOR_WATCHDOG_H
#define FABULA_MONITOR_WATCHDOG_H

#include "config/config.h"

typedef struct watchdog watchdog_t;

/* NULL when monitor.hang_check is off. */
watchdog_t *watchdog_start(const monitor_config_t *mc, const char *run_dir, int rank, int world);
/* A step of `seconds` finished (the main thread, after heartbeat_step_end). */
void watchdog_step_done(watchdog_t *w, double seconds);
/* The bound the next step gets, in seconds. */
double watchdog_bound(watchdog_t *w);
void watchdog_stop(watchdog_t **w);

#endif
