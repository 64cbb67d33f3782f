/* monitor/watchdog.h. The state files are small JSON objects; only the
 * watchdog thread touches them, and it makes no MPI call (MPI runs
 * FUNNELED: the main thread, stuck in a collective, owns it). */
#include "monitor/watchdog.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "parallel/heartbeat.h"
#include "util/error.h"

#define RING 64

struct watchdog {
    monitor_config_t mc;
    char *run_dir, *dir;
    int rank, world;
    char host[64];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    double times[RING];     /* the last step times */
    int ntimes;
};

static double median(const double *v, int n)
{
    double s[RING];
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            const double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* with w->mu held; *med: the median step time, 0 when none is known */
static double bound_locked(const watchdog_t *w, double *med)
{
    const int n = w->ntimes < RING ? w->ntimes : RING;
    *med = n ? median(w->times, n) : 0.0;
    if (!n)
        return w->mc.hang_first_s;
    const double b = w->mc.hang_factor * *med;
    return b > w->mc.hang_min_s ? b : w->mc.hang_min_s;
}

double watchdog_bound(watchdog_t *w)
{
    double med;
    pthread_mutex_lock(&w->mu);
    const double b = bound_locked(w, &med);
    pthread_mutex_unlock(&w->mu);
    return b;
}

void watchdog_step_done(watchdog_t *w, double seconds)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->times[w->ntimes++ % RING] = seconds;
    pthread_mutex_unlock(&w->mu);
}

static char *path_of(const watchdog_t *w, int rank)
{
    char *p = fb_malloc(strlen(w->dir) + 32);
    sprintf(p, "%s/rank-%d.json", w->dir, rank);
    return p;
}

/* `text` into `path` through a temporary file and a rename, so a reader
 * never sees half of it. Not atomic_write_file: its failure ends the job
 * through MPI, which this thread must not call; a failed write here is a
 * lost diagnosis, said and skipped. */
static void write_text(const watchdog_t *w, const char *path, const char *text)
{
    char *tmp = fb_malloc(strlen(path) + 8);
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(text, f) >= 0;
    ok = (f && fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "fabula: warning: rank %d: hang watchdog: cannot write %s\n", w->rank, path);
        remove(tmp);
    }
    free(tmp);
}

/* What this rank is doing, into RUN_DIR/hang/rank-R.json. A failed write is
 * a lost diagnosis (write_text). */
static void write_state(const watchdog_t *w, const heartbeat_snapshot_t *s, double now)
{
    json_t *o = json_pack("{s:i, s:s, s:i, s:I, s:f, s:b}", "rank", w->rank, "host", w->host, "pid", (int)getpid(),
                          "step", (json_int_t)s->step, "step_s", now - s->step_t0, "waiting", s->waiting);
    if (!o)
        return;
    if (s->waiting) {
        json_object_set_new(o, "group", json_string(s->group));
        json_object_set_new(o, "call", json_string(s->call));
        json_object_set_new(o, "seq", json_integer((json_int_t)s->seq));
        json_object_set_new(o, "wait_s", json_real(now - s->wait_t0));
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return;
    if (mkdir(w->dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fabula: warning: rank %d: hang watchdog: cannot create %s: %s\n", w->rank, w->dir,
                strerror(errno));
    } else {
        char *p = path_of(w, w->rank);
        write_text(w, p, text);
        free(p);
    }
    free(text);
}

static json_t *read_state(const watchdog_t *w, int rank, long step)
{
    char *p = path_of(w, rank);
    json_t *o = json_load_file(p, 0, NULL);
    free(p);
    if (o && json_integer_value(json_object_get(o, "step")) != step) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* "0-3,5" from a sorted rank list, into buf */
static void ranks_text(const int *r, int n, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used + 24 < cap;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? "," : "", r[i]);
        if (j > i)
            used += (size_t)snprintf(buf + used, cap - used, "-%d", r[j]);
        i = j + 1;
    }
    if (!n)
        snprintf(buf, cap, "none");
}

static int same_wait(json_t *a, const char *group, const char *call, json_int_t seq)
{
    return json_is_true(json_object_get(a, "waiting")) &&
           strcmp(json_string_value(json_object_get(a, "group")), group) == 0 &&
           strcmp(json_string_value(json_object_get(a, "call")), call) == 0 &&
           json_integer_value(json_object_get(a, "seq")) == seq;
}

/* The reporter: every rank's state for `step`, the wait most of them are
 * in, the ranks that are not in it; RUN_DIR/hang.txt and hang.json. */
static void report(const watchdog_t *w, long step, double elapsed, double bound, double med)
{
    json_t **st = fb_calloc((size_t)w->world, sizeof *st);
    for (int r = 0; r < w->world; r++)
        st[r] = read_state(w, r, step);
    /* the most common wait: the collective the arrived ranks are in */
    int best = -1, best_n = 0;
    for (int r = 0; r < w->world; r++) {
        if (!st[r] || !json_is_true(json_object_get(st[r], "waiting")))
            continue;
        int n = 0;
        for (int q = 0; q < w->world; q++)
            n += st[q] && same_wait(st[q], json_string_value(json_object_get(st[r], "group")),
                                    json_string_value(json_object_get(st[r], "call")),
                                    json_integer_value(json_object_get(st[r], "seq")));
        if (n > best_n)
            best = r, best_n = n;
    }
    int *in = fb_calloc((size_t)w->world, sizeof *in), nin = 0;
    int *out = fb_calloc((size_t)w->world, sizeof *out), nout = 0;
    int *gone = fb_calloc((size_t)w->world, sizeof *gone), ngone = 0;
    const char *group = best >= 0 ? json_string_value(json_object_get(st[best], "group")) : NULL;
    const char *call = best >= 0 ? json_string_value(json_object_get(st[best], "call")) : NULL;
    const json_int_t seq = best >= 0 ? json_integer_value(json_object_get(st[best], "seq")) : 0;
    for (int r = 0; r < w->world; r++) {
        if (!st[r])
            gone[ngone++] = r;
        else if (best >= 0 && same_wait(st[r], group, call, seq))
            in[nin++] = r;
        else
            out[nout++] = r;
    }
    json_t *j = json_pack("{s:I, s:f, s:f}", "step", (json_int_t)step, "elapsed_s", elapsed, "bound_s", bound);
    json_object_set_new(j, "median_step_s", med > 0 ? json_real(med) : json_null());
    char head[512], line[1024], list[512];
    snprintf(head, sizeof head, "step %ld has run %.1f s, past its bound of %.1f s (%s)", step, elapsed, bound,
             med > 0 ? "monitor.hang_factor x the median step time, at least monitor.hang_min_s"
                     : "monitor.hang_first_s: no step time known yet");
    /* a line a rank at most (its host name is short) */
    size_t cap = 4096 + (size_t)w->world * (sizeof line + 64), used = 0;
    char *text = fb_malloc(cap);
    used += (size_t)snprintf(text + used, cap - used, "hang: %s\n", head);
    if (best >= 0) {
        ranks_text(in, nin, list, sizeof list);
        used += (size_t)snprintf(text + used, cap - used, "  waiting in %s on group %s (call %lld): ranks %s\n",
                                 call, group, (long long)seq, list);
        json_object_set_new(j, "waiting", json_pack("{s:s, s:s, s:I}", "group", group, "call", call, "seq",
                                                    (json_int_t)seq));
    }
    /* ranks outside any collective hold the others up (the likely cause),
     * ranks waiting in another collective wait on them in turn */
    json_t *outside = json_array(), *elsewhere = json_array(), *suspects = json_array(), *hosts = json_array();
    for (int i = 0; i < nout; i++) {
        json_t *s = st[out[i]];
        const char *host = json_string_value(json_object_get(s, "host"));
        const int waiting = json_is_true(json_object_get(s, "waiting"));
        if (waiting)
            snprintf(line, sizeof line, "  waiting elsewhere: rank %d (%s): %s on group %s (call %lld) for %.1f s\n",
                     out[i], host, json_string_value(json_object_get(s, "call")),
                     json_string_value(json_object_get(s, "group")),
                     (long long)json_integer_value(json_object_get(s, "seq")),
                     json_real_value(json_object_get(s, "wait_s")));
        else
            snprintf(line, sizeof line, "  not arrived: rank %d (%s): in step %ld outside any collective for %.1f s\n",
                     out[i], host, step, json_real_value(json_object_get(s, "step_s")));
        used += (size_t)snprintf(text + used, cap - used, "%s", line);
        json_array_append(waiting ? elsewhere : outside, s);
        if (waiting)
            continue;
        json_array_append_new(suspects, json_integer(out[i]));
        int seen = 0;
        for (size_t k = 0; k < json_array_size(hosts); k++)
            seen |= strcmp(json_string_value(json_array_get(hosts, k)), host) == 0;
        if (!seen)
            json_array_append_new(hosts, json_string(host));
    }
    ranks_text(gone, ngone, list, sizeof list);
    if (ngone)
        used += (size_t)snprintf(text + used, cap - used,
                                 "  no heartbeat (process or node gone?): ranks %s\n", list);
    json_t *ga = json_array();
    for (int i = 0; i < ngone; i++) {
        json_array_append_new(ga, json_integer(gone[i]));
        json_array_append_new(suspects, json_integer(gone[i]));
    }
    json_object_set_new(j, "not_arrived", outside);
    json_object_set_new(j, "waiting_elsewhere", elsewhere);
    json_object_set_new(j, "no_heartbeat", ga);
    json_object_set_new(j, "suspect_ranks", suspects);
    json_object_set_new(j, "suspect_hosts", hosts);
    fputs(text, stderr);
    char *p = fb_malloc(strlen(w->run_dir) + 16);
    sprintf(p, "%s/hang.txt", w->run_dir);
    write_text(w, p, text);
    sprintf(p, "%s/hang.json", w->run_dir);
    char *js = json_dumps(j, JSON_INDENT(2));
    if (js) {
        write_text(w, p, js);
        free(js);
    }
    free(p);
    free(text);
    json_decref(j);
    for (int r = 0; r < w->world; r++)
        json_decref(st[r]);
    free(st);
    free(in);
    free(out);
    free(gone);
}

/* Whether a lower rank wrote its state for this step: it reports then. */
static int lower_reports(const watchdog_t *w, long step)
{
    for (int r = 0; r < w->rank; r++) {
        json_t *o = read_state(w, r, step);
        if (o) {
            json_decref(o);
            return 1;
        }
    }
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void *run(void *arg)
{
    watchdog_t *w = arg;
    long written = -1;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        double med;
        const double bound = bound_locked(w, &med);
        double period = bound / 20.0;
        period = period < 0.1 ? 0.1 : period > 2.0 ? 2.0 : period;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        const double t = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + period;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
        pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (w->stop)
            break;
        heartbeat_snapshot_t s;
        heartbeat_read(&s);
        const double now = heartbeat_now(), elapsed = now - s.step_t0;
        if (!s.in_step || elapsed <= 0.5 * bound)
            continue;
        pthread_mutex_unlock(&w->mu);
        if (written != s.step) {
            write_state(w, &s, now);
            written = s.step;
        }
        if (elapsed > bound) {
            char msg[256];
            snprintf(msg, sizeof msg, "hang: step %ld ran past its bound of %.1f s: report in %s/hang.txt", s.step,
                     bound, w->run_dir);
            if (!lower_reports(w, s.step)) {
                heartbeat_read(&s);
                write_state(w, &s, heartbeat_now());
                report(w, s.step, heartbeat_now() - s.step_t0, bound, med);
                fprintf(stderr, "fabula: error: %s (exit %d)\n", msg, FB_EXIT_HUNG);
            } else {
                /* the reporter reads this rank's state and writes before the launcher tears the job down */
                sleep_s(2.0 * period + 3.0);
            }
            fb_exit_now(FB_EXIT_HUNG, msg);
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

watchdog_t *watchdog_start(const monitor_config_t *mc, const char *run_dir, int rank, int world)
{
    if (!mc->hang_check)
        return NULL;
    watchdog_t *w = fb_calloc(1, sizeof *w);
    w->mc = *mc;
    w->rank = rank;
    w->world = world;
    w->run_dir = fb_malloc(strlen(run_dir) + 1);
    strcpy(w->run_dir, run_dir);
    w->dir = fb_malloc(strlen(run_dir) + 8);
    sprintf(w->dir, "%s/hang", run_dir);
    if (gethostname(w->host, sizeof w->host - 1) != 0)
        snprintf(w->host, sizeof w->host, "?");
    if (pthread_mutex_init(&w->mu, NULL) != 0 || pthread_cond_init(&w->cv, NULL) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "hang watchdog: cannot create its mutex");
    /* the thread takes no signal: preemption's handlers keep running on the
     * main thread, as without it (the new thread inherits the mask) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    const int e = pthread_create(&w->thread, NULL, run, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        fb_fatal(FB_EXIT_INTERNAL, "hang watchdog: pthread_create: %s", strerror(e));
    return w;
}

void watchdog_stop(watchdog_t **wp)
{
    watchdog_t *w = wp ? *wp : NULL;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->run_dir);
    free(w->dir);
    free(w);
    *wp = NULL;
}
