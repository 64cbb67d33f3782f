/* What this process is doing, for the hang watchdog (src/monitor/watchdog.h,
 * docs/reliability.md "Hangs"): the training step it is in and, when it is
 * blocked in a collective or a wait, which group, which kind of call and the
 * group's call number. Written by the main thread at every step boundary and
 * every blocking communication call, read by the watchdog thread; each field
 * is atomic on its own, so a reader sees each one whole, and the few that
 * change together may be a call apart (good enough for a diagnosis). */
#ifndef FABULA_PARALLEL_HEARTBEAT_H
#define FABULA_PARALLEL_HEARTBEAT_H

#include <stdint.h>

typedef struct heartbeat_snapshot {
    long step;              /* the step begun last (1-based), 0 before the first */
    int in_step;            /* between heartbeat_step_begin and _end */
    double step_t0;         /* its start, seconds of the monotonic clock */
    int waiting;            /* blocked in a collective, a wait or a receive */
    char group[24];         /* the group's label ("dp", "ep", ...; comm_set_label) */
    char call[24];          /* the kind of call (comm_kind_name) */
    uint64_t seq;           /* the group's call number: every rank of a group numbers its calls alike */
    double wait_t0;         /* when the wait began */
} heartbeat_snapshot_t;

/* Seconds of the clock the snapshot's times are on (CLOCK_MONOTONIC). */
double heartbeat_now(void);
void heartbeat_step_begin(long step);
void heartbeat_step_end(void);
/* A blocking call of group `label` begins / ends (src/parallel only). */
void heartbeat_wait_begin(const char *label, const char *call, uint64_t seq);
void heartbeat_wait_end(void);
void heartbeat_read(heartbeat_snapshot_t *out);

#endif
