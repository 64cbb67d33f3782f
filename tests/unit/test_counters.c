/* Hardware counters: the API contract in both cases (available or not),
 * the team sum, IPC and LLC MPKI arithmetic on constructed counts, and,
 * where the PMU is reachable, that the counts are plausible (the team's
 * above the main thread's for a parallel loop). Also checks timer_now
 * against a known sleep. */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "monitor/counters.h"
#include "util/timer.h"

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

/* The same loop spread over the OpenMP team. */
static long long busy_loop_team(long n)
{
    long long r = 0;
#pragma omp parallel reduction(+ : r)
    r += busy_loop(n);
    return r;
}

/* Counts made up by hand, so that every expected value is plain arithmetic. */
static void test_arithmetic(void)
{
    const long long main_v[COUNTER_EVENTS] = {1000, 400, 7};
    const long long workers[3][COUNTER_EVENTS] = {{2000, 1000, 3}, {500, 100, 0}, {0, 0, 0}};
    long long team[COUNTER_EVENTS] = {-1, -1, -1};
    counters_sum_team(main_v, workers, 3, team);
    check(team[COUNTER_INS] == 3500 && team[COUNTER_CYC] == 1500 && team[COUNTER_LLC] == 10,
          "team sum: main + every worker, per event");
    counters_sum_team(main_v, workers, 0, team);
    check(team[COUNTER_INS] == 1000 && team[COUNTER_CYC] == 400 && team[COUNTER_LLC] == 7,
          "team sum without workers is the main thread");

    check(counters_ipc(3500, 1500) == 3500.0 / 1500.0, "ipc = instructions / cycles");
    check(counters_ipc(10, 0) == -1.0 && counters_ipc(10, -3) == -1.0, "ipc -1 without cycles");
    check(counters_per_kilo_ins(10, 3500) == 10.0 * 1000.0 / 3500.0, "mpki = 1000 misses / instructions");
    check(counters_per_kilo_ins(10, 0) == -1.0, "mpki -1 without instructions");

    /* two phase pairs, then a second rank's sums: what phase.c and ranks.c add */
    counter_sample_t a = {{1000, 400, 7}, {3500, 1500, 10}};
    counter_sample_t b = {{10, 20, 1}, {30, 60, 2}};
    counter_sums_t s;
    memset(&s, 0, sizeof s);
    counter_sums_add_sample(&s, &a);
    counter_sums_add_sample(&s, &b);
    check(s.main[COUNTER_INS] == 1010 && s.main[COUNTER_CYC] == 420 && s.main[COUNTER_LLC] == 8 &&
              s.team[COUNTER_INS] == 3530 && s.team[COUNTER_CYC] == 1560 && s.team[COUNTER_LLC] == 12,
          "samples add per event, main and team apart");
    counter_sums_t r = s;
    counter_sums_add(&r, &s);
    check(r.main[COUNTER_INS] == 2020 && r.team[COUNTER_CYC] == 3120 && r.team[COUNTER_LLC] == 24,
          "sums add per event");
    check(counters_ipc(s.team[COUNTER_INS], s.team[COUNTER_CYC]) == 3530.0 / 1560.0,
          "team ipc from the summed counts, not a mean of ratios");
}

int main(void)
{
    test_arithmetic();

    /* before init: unavailable, and start/stop are harmless no-ops */
    check(!counters_available(), "unavailable before counters_init");
    counter_sample_t c, untouched;
    memset(&untouched, 0x5a, sizeof untouched);
    c = untouched;
    counters_start();
    check(counters_stop(&c) == 0 && memcmp(&c, &untouched, sizeof c) == 0,
          "stop before init returns 0, values untouched");

    counters_init(1);
    counters_init(1); /* second call must not print again or re-initialise */
    const char *why = counters_unavailable_reason();

    if (counters_available()) {
        const int team = counters_team_threads();
        printf("PAPI available: LLC %s, team of %d thread(s)\n", counters_llc() ? "counted" : "absent", team);
        check(why[0] == '\0', "no unavailability reason when available");
        const long n = 2000000;
        counters_start();
        long long r = busy_loop(n);
        int ok = counters_stop(&c);
        printf("  loop of %ld iterations (result %lld): %lld instructions, %lld cycles, %lld LLC misses\n", n, r,
               c.main[COUNTER_INS], c.main[COUNTER_CYC], c.main[COUNTER_LLC]);
        check(ok == 1, "counters_stop returns 1");
        check(c.main[COUNTER_INS] > n, "instructions exceed the iteration count");
        check(c.main[COUNTER_CYC] > 0, "cycles positive");
        check(counters_llc() || c.main[COUNTER_LLC] == 0, "LLC 0 where not counted");
        /* a stop without a start must not return stale numbers */
        counter_sample_t c2 = untouched;
        check(counters_stop(&c2) == 0 && memcmp(&c2, &untouched, sizeof c2) == 0,
              "second stop without start returns 0");
        if (team > 0) {
            counters_start();
            r = busy_loop_team(n);
            ok = counters_stop(&c);
            printf("  team loop (result %lld): main %lld, team %lld instructions over %d thread(s)\n", r,
                   c.main[COUNTER_INS], c.team[COUNTER_INS], counters_team_threads());
            check(ok == 1 && counters_team_threads() == team, "the team is still counted");
            check(c.team[COUNTER_INS] >= c.main[COUNTER_INS] && c.team[COUNTER_CYC] >= c.main[COUNTER_CYC],
                  "the team's counts include the main thread's");
            check(team == 1 || c.team[COUNTER_INS] > c.main[COUNTER_INS] + n,
                  "the other threads' loops are in the team's instructions");
        }
    } else {
        printf("PAPI unavailable: %s\n", why);
        check(why[0] != '\0' && strcmp(why, "not initialised") != 0, "a reason is given after init");
        check(!counters_llc() && counters_team_threads() == 0, "no LLC and no team when unavailable");
        for (int k = 0; k < 3; k++) {
            counters_start();
            busy_loop(1000);
            c = untouched;
            check(counters_stop(&c) == 0 && memcmp(&c, &untouched, sizeof c) == 0,
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
