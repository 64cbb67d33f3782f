/* Wall-clock (and process CPU) timing for the step breakdown. */
#ifndef FABULA_MONITOR_TIMER_H
#define FABULA_MONITOR_TIMER_H

#include <time.h>

#include "util/error.h"

/* Seconds on a monotonic clock (unaffected by NTP steps); only differences
 * are meaningful. */
static inline double timer_now(void)
{
    struct timespec ts;
    CHECK_SYS(clock_gettime(CLOCK_MONOTONIC, &ts));
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds this process has used, all its threads: beside the wall
 * clock, what a step cost the machine whatever else held the cores. */
static inline double timer_process_cpu(void)
{
    struct timespec ts;
    CHECK_SYS(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts));
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
