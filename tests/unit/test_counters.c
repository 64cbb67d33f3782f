/* Hardware counters: the API contract in both cases (available or not) and,
 * where the PMU is reachable, that the counts are plausible. Also checks
 * timer_now against a known sleep. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "monitor/counters.h"
#include "monitor/timer.h"

static int failures;

static void check(int cond, const char *what)
{
    printf("  %s: %s\n", cond ? "ok  " : "FAIL", what);
    if (!cond)
        failures++;
}

/* A loop the compiler cannot drop: at least one instruction per iteration. */
static long long busy_loop(long n)
{
    volatile long long acc = 0;
    for (long i = 0; i < n; i++)
        acc += i ^ (acc >> 3);
    return acc;
}

int main(void)
{
    /* before init: unavailable, and start/stop are harmless no-ops */
    check(!counters_available(), "unavailable before counters_init");
    long long ins = -7, cyc = -9;
    counters_start();
    check(counters_stop(&ins, &cyc) == 0 && ins == -7 && cyc == -9, "stop before init returns 0, values untouched");

    counters_init(1);
    counters_init(1); /* second call must not print again or re-initialise */
    const char *why = counters_unavailable_reason();

    if (counters_available()) {
        printf("PAPI available: counting PAPI_TOT_INS and PAPI_TOT_CYC\n");
        check(why[0] == '\0', "no unavailability reason when available");
        const long n = 2000000;
        counters_start();
        long long r = busy_loop(n);
        int ok = counters_stop(&ins, &cyc);
        printf("  loop of %ld iterations (result %lld): %lld instructions, %lld cycles\n", n, r, ins, cyc);
        check(ok == 1, "counters_stop returns 1");
        check(ins > n, "instructions exceed the iteration count");
        check(cyc > 0, "cycles positive");
        /* a stop without a start must not return stale numbers */
        long long i2 = -1, c2 = -1;
        check(counters_stop(&i2, &c2) == 0 && i2 == -1 && c2 == -1, "second stop without start returns 0");
    } else {
        printf("PAPI unavailable: %s\n", why);
        check(why[0] != '\0' && strcmp(why, "not initialised") != 0, "a reason is given after init");
        for (int k = 0; k < 3; k++) {
            counters_start();
            busy_loop(1000);
            ins = 11;
            cyc = 13;
            check(counters_stop(&ins, &cyc) == 0 && ins == 11 && cyc == 13,
                  "start/stop when unavailable: returns 0, values untouched");
        }
    }

    double t0 = timer_now();
    struct timespec req = {0, 20 * 1000 * 1000};
    while (nanosleep(&req, &req) != 0)
        ;
    double t1 = timer_now();
    printf("  timer: 20 ms sleep measured as %.4f s\n", t1 - t0);
    check(t1 - t0 >= 0.020 && t1 - t0 < 5.0, "timer_now measures a 20 ms sleep");
    check(timer_now() >= t1, "timer_now is monotonic");

    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
