/* Per-phase step timers, CoMD style: a fixed set of handles bracketed with
 * PHASE_BEGIN/PHASE_END, which compile to nothing in a build configured
 * with --disable-phase-timers (FB_PHASE_TIMERS undefined).
 *
 * Phases are exclusive of communication: a phase that blocks in a
 * collective or a comm_wait (the ep all-to-alls in forward, the gradient
 * reductions in backward, the norm and gathers of the optimizer) is charged
 * only its own time; every blocked second of the step is split by
 * phase_step_end into "imbalance" (waiting for the slowest rank) and
 * "comm_wait" (the rest: the exposed communication). docs/monitoring.md
 * says how each is measured. */
#ifndef FABULA_MONITOR_PHASE_H
#define FABULA_MONITOR_PHASE_H

#include "build_config.h"

#include "monitor/counters.h"
#include "parallel/comm.h"

typedef enum {
    PHASE_DATA,         /* read + pack of the micro-batches */
    PHASE_FORWARD,
    PHASE_BACKWARD,     /* and the end-of-backward gradient flush */
    PHASE_COMM_WAIT,    /* derived: blocked time less the imbalance */
    PHASE_OPTIMIZER,    /* norm, clip, AdamW, parameter gathers */
    PHASE_CHECKPOINT,   /* the save after the previous step, wall time */
    PHASE_IMBALANCE,    /* derived: waiting for the slowest rank */
    PHASE_COUNT
} phase_id_t;

/* The metrics.jsonl key of a phase ("data", "forward", ..., "imbalance"). */
const char *phase_name(phase_id_t p);

#ifdef FB_PHASE_TIMERS
void phase_begin(phase_id_t p);
void phase_end(phase_id_t p);
#define PHASE_BEGIN(p) phase_begin(p)
#define PHASE_END(p) phase_end(p)
#define PHASE_TIMERS_COMPILED 1
#else
#define PHASE_BEGIN(p) ((void)0)
#define PHASE_END(p) ((void)0)
#define PHASE_TIMERS_COMPILED 0
#endif

/* One rank's step. */
typedef struct phase_times {
    double s[PHASE_COUNT];  /* seconds per phase */
    double step_time;       /* the step's wall time (checkpoint not included) */
    double waits;           /* seconds blocked in communication during the step */
    double busy;            /* step_time - waits: what this rank computed */
    int counted;            /* PAPI counted the phases: ctr[].main holds */
    int llc;                /* ... with COUNTER_LLC */
    int team_threads;       /* ... and ctr[].team over this many threads; 0: not the team */
    counter_sums_t ctr[PHASE_COUNT];
} phase_times_t;

/* Turns the timers on (they start off: a run with monitor.enabled false
 * pays one branch per handle). Where PAPI counts (counters_init found
 * counters), each phase but the checkpoint also counts instructions, cycles
 * and LLC misses, of the calling thread and of its OpenMP team. */
void phase_enable(int on);
int phase_enabled(void);

/* Marks the start of a step: clears the step's phases except the
 * checkpoint, which is timed between steps and reported with the next. */
void phase_step_begin(void);

/* Ends the step that took `step_time` seconds: fills *out. Collective over
 * `world` (one 8-byte allreduce of the largest busy time, outside the step's
 * own waits): imbalance = max over ranks of busy - this rank's busy, at most
 * the time it was blocked; comm_wait = blocked - imbalance. */
void phase_step_end(double step_time, comm_t *world, phase_times_t *out);

/* The timers' own cost in this step so far: handle pairs run times the
 * cost of one pair, measured by phase_enable (its clock reads and wait-sum
 * reads; PAPI's start and stop where it counts). */
double phase_handles_cost(void);

/* Sleeps `seconds` (the monitor.debug_delay_* throttles). */
void phase_sleep(double seconds);

#endif
