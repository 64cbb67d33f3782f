/* PAPI hardware counters with a graceful "unavailable" path. */
#include "build_config.h"

#include "monitor/counters.h"

#include <stdio.h>

#include "util/error.h"

#ifdef HAVE_PAPI
#include <papi.h>
#endif

static int initialised;
static int available;
static int running;
static char reason[1200] = "not initialised";

/* Records why counters are off; the message is printed once by init. */
static void set_unavailable(const char *what, const char *detail)
{
    available = 0;
    snprintf(reason, sizeof reason, "%.100s%s%.1000s", what, detail && detail[0] ? ": " : "", detail ? detail : "");
}

#ifdef HAVE_PAPI
static int event_set = PAPI_NULL;

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
    const int events[2] = {PAPI_TOT_INS, PAPI_TOT_CYC};
    const char *names[2] = {"PAPI_TOT_INS", "PAPI_TOT_CYC"};
    char what[64];
    for (int i = 0; i < 2; i++) {
        ret = PAPI_query_event(events[i]);
        if (ret != PAPI_OK) {
            snprintf(what, sizeof what, "event %s", names[i]);
            set_unavailable(what, PAPI_strerror(ret));
            return;
        }
    }
    ret = PAPI_create_eventset(&event_set);
    if (ret != PAPI_OK) {
        set_unavailable("PAPI_create_eventset", PAPI_strerror(ret));
        return;
    }
    for (int i = 0; i < 2; i++) {
        ret = PAPI_add_event(event_set, events[i]);
        if (ret != PAPI_OK) {
            snprintf(what, sizeof what, "PAPI_add_event(%s)", names[i]);
            set_unavailable(what, PAPI_strerror(ret));
            return;
        }
    }
    /* Some kernels accept the event set and refuse to count at start. */
    long long v[2];
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
}

/* A counter failure after a good probe: warn once, then carry on without. */
static void fail_at_runtime(const char *call, int ret)
{
    set_unavailable(call, PAPI_strerror(ret));
    fb_warn("PAPI: %s; hardware counters switched off for the rest of the run", reason);
}
#endif

void counters_init(int verbose)
{
    if (initialised)
        return;
    initialised = 1;
#ifdef HAVE_PAPI
    probe();
#else
    set_unavailable("built without PAPI", NULL);
#endif
    if (!available && verbose)
        printf("fabula: PAPI: no hardware counters available here (%s); continuing with timers only\n", reason);
}

int counters_available(void) { return available; }

const char *counters_unavailable_reason(void) { return reason; }

void counters_start(void)
{
    if (!available || running)
        return;
#ifdef HAVE_PAPI
    int ret = PAPI_start(event_set);
    if (ret != PAPI_OK) {
        fail_at_runtime("PAPI_start", ret);
        return;
    }
    running = 1;
#endif
}

int counters_stop(long long *instructions, long long *cycles)
{
    if (!available || !running)
        return 0;
    running = 0;
#ifdef HAVE_PAPI
    long long v[2];
    int ret = PAPI_stop(event_set, v);
    if (ret != PAPI_OK) {
        fail_at_runtime("PAPI_stop", ret);
        return 0;
    }
    *instructions = v[0];
    *cycles = v[1];
    return 1;
#else
    (void)instructions;
    (void)cycles;
    return 0;
#endif
}
