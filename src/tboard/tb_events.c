#include "tboard/tb_events.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "tboard/crc32c.h"
#include "tboard/tb_hist.h"
#include "util/append_file.h"
#include "util/error.h"

/* Field numbers of tensorflow/core/util/event.proto and
 * tensorflow/core/framework/summary.proto. */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7 };
enum { SL_STATUS = 1, SL_START = 1 };
enum { SUM_VALUE = 1 };
enum { VAL_TAG = 1, VAL_SIMPLE = 2, VAL_HISTO = 5 };
enum { HI_MIN = 1, HI_MAX = 2, HI_NUM = 3, HI_SUM = 4, HI_SUMSQ = 5, HI_LIMIT = 6, HI_BUCKET = 7 };

#define FILE_PREFIX "events.out.tfevents."

struct tb_events {
    fb_append_t *f;
    char *path;
    pb_buf_t ev;        /* the event being built */
    size_t summary;     /* pb_begin mark of the open Summary */
    unsigned char *rec; /* framing scratch */
    size_t rec_cap;
};

static double wall_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void tb_record_frame(const void *payload, size_t n, unsigned char *out)
{
    put_le(out, n, 8);
    put_le(out + 8, crc32c_mask(crc32c(out, 8)), 4);
    memcpy(out + 12, payload, n);
    put_le(out + 12 + n, crc32c_mask(crc32c(payload, n)), 4);
}

static void write_event(tb_events_t *w)
{
    const size_t n = w->ev.len + 16;
    if (n > w->rec_cap) {
        free(w->rec);
        w->rec = fb_malloc(n);
        w->rec_cap = n;
    }
    tb_record_frame(w->ev.data, w->ev.len, w->rec);
    /* one record per write: a reader (TensorBoard polling the directory)
     * sees whole records, and a killed run loses none */
    fb_append_record(w->f, w->rec, n);
    pb_clear(&w->ev);
}

static void event_head(tb_events_t *w, long step)
{
    pb_clear(&w->ev);
    pb_double(&w->ev, EV_WALL_TIME, wall_now());
    if (step)
        pb_int64(&w->ev, EV_STEP, step);
}

/* The largest <seconds> among dir's event files (0 if none). */
static long latest_stamp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fb_fatal(FB_EXIT_IO, "%s: %s", dir, strerror(errno));
    long best = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, FILE_PREFIX, sizeof FILE_PREFIX - 1) != 0)
            continue;
        long s = strtol(e->d_name + sizeof FILE_PREFIX - 1, NULL, 10);
        best = s > best ? s : best;
    }
    closedir(d);
    return best;
}

tb_events_t *tb_events_open(const char *dir)
{
    tb_events_t *w = fb_calloc(1, sizeof *w);
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    /* a '/' in the name would make another directory */
    for (char *p = host; *p; p++)
        if (*p == '/')
            *p = '_';
    long stamp = (long)time(NULL), latest = latest_stamp(dir);
    if (stamp <= latest)
        stamp = latest + 1;
    size_t n = strlen(dir) + strlen(host) + 64;
    w->path = fb_malloc(n);
    snprintf(w->path, n, "%s/" FILE_PREFIX "%010ld.%s.%ld.0", dir, stamp, host, (long)getpid());
    w->f = fb_append_create(w->path);
    pb_init(&w->ev);
    event_head(w, 0);
    pb_string(&w->ev, EV_FILE_VERSION, "brain.Event:2");
    write_event(w);
    return w;
}

const char *tb_events_path(const tb_events_t *w) { return w->path; }

void tb_events_session_start(tb_events_t *w, long step)
{
    event_head(w, step);
    size_t m = pb_begin(&w->ev);
    pb_int64(&w->ev, SL_STATUS, SL_START);
    pb_end(&w->ev, EV_SESSION_LOG, m);
    write_event(w);
}

void tb_events_scalars_begin(tb_events_t *w, long step)
{
    event_head(w, step);
    w->summary = pb_begin(&w->ev);
}

void tb_events_scalar(tb_events_t *w, const char *tag, double value)
{
    size_t m = pb_begin(&w->ev);
    pb_string(&w->ev, VAL_TAG, tag);
    pb_float(&w->ev, VAL_SIMPLE, (float)value);
    pb_end(&w->ev, SUM_VALUE, m);
}

void tb_events_scalars_end(tb_events_t *w)
{
    pb_end(&w->ev, EV_SUMMARY, w->summary);
    write_event(w);
}

void tb_events_histogram(tb_events_t *w, long step, const char *tag, const double *sums, const double *exts)
{
    size_t nlim;
    const double *lim = tb_hist_limits(&nlim);
    const double *counts = sums + TB_HIST_SUMS;
    size_t first = nlim, last = 0;
    for (size_t i = 0; i < nlim; i++)
        if (counts[i] > 0) {
            first = i < first ? i : first;
            last = i;
        }
    if (first == nlim)
        return;
    event_head(w, step);
    size_t ms = pb_begin(&w->ev);
    size_t mv = pb_begin(&w->ev);
    pb_string(&w->ev, VAL_TAG, tag);
    size_t mh = pb_begin(&w->ev);
    pb_double(&w->ev, HI_MIN, -exts[TB_HIST_NEGMIN]);
    pb_double(&w->ev, HI_MAX, exts[TB_HIST_MAX]);
    pb_double(&w->ev, HI_NUM, sums[TB_HIST_NUM]);
    pb_double(&w->ev, HI_SUM, sums[TB_HIST_SUM]);
    pb_double(&w->ev, HI_SUMSQ, sums[TB_HIST_SUMSQ]);
    pb_doubles(&w->ev, HI_LIMIT, lim + first, last - first + 1);
    pb_doubles(&w->ev, HI_BUCKET, counts + first, last - first + 1);
    pb_end(&w->ev, VAL_HISTO, mh);
    pb_end(&w->ev, SUM_VALUE, mv);
    pb_end(&w->ev, EV_SUMMARY, ms);
    write_event(w);
}

void tb_events_close(tb_events_t *w)
{
    if (!w)
        return;
    fb_append_close(w->f);
    pb_free(&w->ev);
    free(w->rec);
    free(w->path);
    free(w);
}
