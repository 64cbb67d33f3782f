/* parallel/heartbeat.h. Strings go in as indices into a small table of the
 * labels and call names seen, so that every field is one lock-free atomic. */
#include "parallel/heartbeat.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NAMES 32

static _Atomic long hb_step;
static atomic_int hb_in_step, hb_waiting, hb_group, hb_call;
static _Atomic uint64_t hb_seq;
static _Atomic double hb_step_t0, hb_wait_t0;
/* written by the main thread only, before the index that names it is published */
static char names[NAMES][24];
static atomic_int nnames;

double heartbeat_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int name_index(const char *s)
{
    const int n = atomic_load(&nnames);
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], s, sizeof names[i] - 1) == 0)
            return i;
    if (n == NAMES)
        return -1;
    snprintf(names[n], sizeof names[n], "%s", s);
    atomic_store(&nnames, n + 1);
    return n;
}

void heartbeat_step_begin(long step)
{
    atomic_store(&hb_step_t0, heartbeat_now());
    atomic_store(&hb_step, step);
    atomic_store(&hb_in_step, 1);
}

void heartbeat_step_end(void) { atomic_store(&hb_in_step, 0); }

void heartbeat_wait_begin(const char *label, const char *call, uint64_t seq)
{
    atomic_store(&hb_group, name_index(label ? label : "?"));
    atomic_store(&hb_call, name_index(call));
    atomic_store(&hb_seq, seq);
    atomic_store(&hb_wait_t0, heartbeat_now());
    atomic_store(&hb_waiting, 1);
}

void heartbeat_wait_end(void) { atomic_store(&hb_waiting, 0); }

static void copy_name(char *dst, size_t cap, int i)
{
    snprintf(dst, cap, "%s", i >= 0 && i < atomic_load(&nnames) ? names[i] : "?");
}

void heartbeat_read(heartbeat_snapshot_t *out)
{
    memset(out, 0, sizeof *out);
    out->step = atomic_load(&hb_step);
    out->in_step = atomic_load(&hb_in_step);
    out->step_t0 = atomic_load(&hb_step_t0);
    out->waiting = atomic_load(&hb_waiting);
    copy_name(out->group, sizeof out->group, atomic_load(&hb_group));
    copy_name(out->call, sizeof out->call, atomic_load(&hb_call));
    out->seq = atomic_load(&hb_seq);
    out->wait_t0 = atomic_load(&hb_wait_t0);
}
