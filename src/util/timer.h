/* The clocks every room times with: the monotonic wall clock and the
 * process's CPU time. In util so that hf, infer, tokenizer and the rest
 * need no clock of their own. */
#ifndef FABULA_UTIL_TIMER_H
#define FABULA_UTIL_TIMER_H

#include <time.h>

#include "util/error.h"

/* Nanoseconds on a monotonic clock, with no check that could print:
 * async-signal-safe (a signal handler times with it). CLOCK_MONOTONIC
 * cannot fail on the systems fabula runs on; 0 if it ever did. */
static inline long long timer_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
