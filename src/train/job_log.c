/* RUN_DIR/jobs.jsonl: one line when a training job starts, one when it ends. */
#include "build_config.h"

#include "train/job_log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/preempt.h"
#include "util/append_file.h"
#include "util/error.h"

static char *log_path;
static int my_rank, world_size;
static long cur_step, ckpt_step = -1, start_step;

static void utc_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, n, "unknown");
}

static json_t *record(const char *event)
{
    char when[32];
    utc_now(when, sizeof when);
    json_t *r = json_object();
    json_object_set_new(r, "event", json_string(event));
    json_object_set_new(r, "time", json_string(when));
    return r;
}

/* The line of `r`, newline included; NULL when it cannot be serialised. */
static char *line_of(json_t *r, size_t *n)
{
    char *text = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (!text)
        return NULL;
    *n = strlen(text);
    char *line = realloc(text, *n + 2);
    if (!line) {
        free(text);
        return NULL;
    }
    line[(*n)++] = '\n';
    line[*n] = '\0';
    return line;
}

static void append(json_t *r, int sync)
{
    size_t n;
    char *line = line_of(r, &n);
    if (!line)
        fb_fatal(FB_EXIT_INTERNAL, "%s: cannot serialise a job record", log_path);
    fb_append_t *f = fb_append_open(log_path);
    fb_append_record(f, line, n);
    if (sync)
        fb_append_sync(f);
    fb_append_close(f);
    free(line);
}

static json_t *end_record(const char *state, int code, int sig, const char *message)
{
    json_t *r = record("end");
    json_object_set_new(r, "state", json_string(state));
    json_object_set_new(r, "step", json_integer(cur_step));
    json_object_set_new(r, "steps_done", json_integer(cur_step - start_step));
    json_object_set_new(r, "exit_code", json_integer(code));
    json_object_set_new(r, "signal", sig ? json_string(preempt_signal_name(sig)) : json_null());
    json_object_set_new(r, "checkpoint_step", ckpt_step >= 0 ? json_integer(ckpt_step) : json_null());
    json_object_set_new(r, "message", message ? json_string(message) : json_null());
    if (my_rank != 0)
        json_object_set_new(r, "rank", json_integer(my_rank));
    return r;
}

/* The fatal note: the process is already failing, so a record that cannot
 * be written is given up quietly (the error itself is on stderr). */
static void on_fatal(int code, const char *msg, int all)
{
    if (!log_path || (all && my_rank != 0))
        return;
    json_t *r = end_record("failed", code, 0, msg);
    size_t n;
    char *line = line_of(r, &n);
    json_decref(r);
    if (!line)
        return;
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        /* one write: records of two failing ranks do not interleave */
        if (write(fd, line, n) == (ssize_t)n)
            fsync(fd);
        close(fd);
    }
    free(line);
}

void job_log_open(const char *run_dir, int rank, int world)
{
    size_t n = strlen(run_dir) + sizeof "/jobs.jsonl";
    free(log_path);
    log_path = fb_malloc(n);
    snprintf(log_path, n, "%s/jobs.jsonl", run_dir);
    my_rank = rank;
    world_size = world;
    cur_step = start_step = 0;
    ckpt_step = -1;
    fb_set_fatal_note(on_fatal);
}

/* Rank 0's command line, arguments with a space or a quote in single
 * quotes, for the reader (fabula report); NULL where /proc does not say. */
static char *command_line(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return NULL;
    static char raw[1 << 15];
    const size_t n = fread(raw, 1, sizeof raw - 1, f);
    fclose(f);
    if (n == 0)
        return NULL;
    raw[n] = '\0';
    size_t cap = 4 * n + 16, len = 0;
    char *out = fb_malloc(cap);
    for (size_t i = 0; i < n; i += strlen(raw + i) + 1) {
        const char *a = raw + i;
        const int quote = strpbrk(a, " \t'\"$") != NULL || !*a;
        if (len)
            out[len++] = ' ';
        if (quote)
            out[len++] = '\'';
        for (; *a; a++) {
            if (*a == '\'') { /* ' -> '\'' */
                memcpy(out + len, "'\\''", 4);
                len += 4;
            } else {
                out[len++] = *a;
            }
        }
        if (quote)
            out[len++] = '\'';
    }
    out[len] = '\0';
    return out;
}

void job_log_start(long step, long steps, int node_ranks, int node_cpus, int threads)
{
    cur_step = start_step = step;
    if (my_rank != 0)
        return;
    json_t *r = record("start");
    char host[256] = "unknown";
    if (gethostname(host, sizeof host - 1) < 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    json_object_set_new(r, "host", json_string(host));
    json_object_set_new(r, "pid", json_integer((json_int_t)getpid()));
    json_object_set_new(r, "ranks", json_integer(world_size));
    json_object_set_new(r, "node_ranks", json_integer(node_ranks));
    json_object_set_new(r, "node_cpus", node_cpus > 0 ? json_integer(node_cpus) : json_null());
    json_object_set_new(r, "threads", json_integer(threads));
    /* the scheduler's id of this job, for the reader of the log only */
    const char *id = getenv("SLURM_JOB_ID");
    if (!id)
        id = getenv("PBS_JOBID");
    json_object_set_new(r, "job_id", id ? json_string(id) : json_null());
    json_object_set_new(r, "step", json_integer(step));
    json_object_set_new(r, "steps", json_integer(steps));
    json_object_set_new(r, "version", json_string(PACKAGE_VERSION));
    char *cmd = command_line();
    json_t *c = cmd ? json_string(cmd) : NULL; /* NULL too where argv is not UTF-8 */
    json_object_set_new(r, "command", c ? c : json_null());
    free(cmd);
    append(r, 0);
    json_decref(r);
}

void job_log_progress(long step, long checkpoint_step)
{
    cur_step = step;
    ckpt_step = checkpoint_step;
}

void job_log_end(int code, int sig, const char *message)
{
    fb_set_fatal_note(NULL);
    if (my_rank == 0) {
        const char *state = code == FB_EXIT_OK ? "finished" : code == FB_EXIT_PREEMPTED ? "preempted" : "failed";
        json_t *r = end_record(state, code, code == FB_EXIT_PREEMPTED ? sig : 0, message);
        append(r, 1);
        json_decref(r);
    }
    free(log_path);
    log_path = NULL;
}
