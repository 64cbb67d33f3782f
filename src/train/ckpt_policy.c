/* The checkpoint directory of a run: naming, the `latest` pointer,
 * keep-last pruning, the choice of the checkpoint to resume from, and the
 * metrics log cut back to it. */
#include "train/ckpt_policy.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "io/atomic_file.h"
#include "io/regular_file.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

#define LATEST "latest"


/* Rank 0: a file of the run directory read back (`latest`, metrics.jsonl),
 * or NULL when there is none; a FIFO or a device in its place is refused
 * (exit 3) rather than blocking the resume. */
static FILE *open_run_file(const char *path)
{
    FILE *f = NULL;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_DATA)
        fb_fatal(FB_EXIT_DATA, "%s", why);
    return code ? NULL : f;
}
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

long ckpt_policy_parse_name(const char *name)
{
    if (strncmp(name, "step-", 5) != 0)
        return -1;
    const char *s = name + 5;
    long step = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*s); s++, digits++) {
        if (step > (long)(__LONG_MAX__ / 10 - 10))
            return -1;
        step = step * 10 + (*s - '0');
    }
    return digits > 0 && strcmp(s, ".h5") == 0 ? step : -1;
}

void ckpt_policy_init(ckpt_policy_t *r, const ckpt_target_t *t)
{
    memset(r, 0, sizeof *r);
    r->t = *t;
    r->dir = t->cfg->checkpoint.dir;
    r->interval = t->cfg->checkpoint.save_interval;
    r->keep_last = t->cfg->checkpoint.keep_last;
    r->last_saved = -1;
}

/* ------------------------------------------------------------ directory */

typedef struct entry {
    long step;
    char *name;
} entry_t;

static int by_step_desc(const void *a, const void *b)
{
    long x = ((const entry_t *)a)->step, y = ((const entry_t *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The checkpoints of dir, newest step first (rank 0). A missing directory
 * has none. Also removes the temporaries of saves that never finished
 * (".step-*.h5.tmp", "latest.tmp.PID") when `clean`. */
static entry_t *list_checkpoints(const char *dir, int *count, int clean)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return NULL;
        fb_fatal(FB_EXIT_IO, "checkpoint directory %s: %s", dir, strerror(errno));
    }
    entry_t *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long step = ckpt_policy_parse_name(de->d_name);
        if (step >= 0) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                e = fb_realloc(e, (size_t)cap * sizeof *e);
            }
            e[n].step = step;
            e[n].name = fb_strdup(de->d_name);
            n++;
        } else if (clean && !strncmp(de->d_name, LATEST ".tmp.", sizeof LATEST + 4)) {
            /* atomic_write_file's temporary of `latest`, from a killed job */
            char *p = join(dir, de->d_name);
            unlink(p);
            free(p);
        } else if (clean && de->d_name[0] == '.' && ckpt_policy_parse_name(de->d_name + 1) < 0) {
            /* ".step-N.h5.tmp": the name without its dot and ".tmp" */
            size_t len = strlen(de->d_name);
            if (len > 5 && !strcmp(de->d_name + len - 4, ".tmp")) {
                char *base = fb_strdup(de->d_name + 1);
                base[len - 5] = '\0';
                if (ckpt_policy_parse_name(base) >= 0) {
                    char *p = join(dir, de->d_name);
                    if (unlink(p) == 0)
                        printf("fabula: checkpoint: removed %s, left by a save that did not finish\n", p);
                    free(p);
                }
                free(base);
            }
        }
    }
    closedir(d);
    if (n > 1)
        qsort(e, (size_t)n, sizeof *e, by_step_desc);
    *count = n;
    return e;
}

static void free_entries(entry_t *e, int n)
{
    for (int i = 0; i < n; i++)
        free(e[i].name);
    free(e);
}

/* Rank 0: the checkpoints beyond keep_last, oldest steps, never `keep`. */
static void prune(const ckpt_policy_t *r, const char *keep)
{
    if (r->keep_last <= 0)
        return;
    int n;
    entry_t *e = list_checkpoints(r->dir, &n, 0);
    int kept = 1; /* `keep` itself */
    for (int i = 0; i < n; i++) {
        if (!strcmp(e[i].name, keep))
            continue;
        if (kept < r->keep_last) {
            kept++;
            continue;
        }
        char *p = join(r->dir, e[i].name);
        if (unlink(p) < 0 && errno != ENOENT)
            fb_warn("checkpoint: cannot remove %s (keep_last = %d): %s", p, r->keep_last, strerror(errno));
        free(p);
    }
    free_entries(e, n);
}

/* ------------------------------------------------------------ saving */

static void save(ckpt_policy_t *r, const ckpt_progress_t *p)
{
    char name[64];
    snprintf(name, sizeof name, "step-%08ld.h5", p->step);
    char *path = join(r->dir, name);
    ckpt_io_stats_t st;
    ckpt_write(&r->t, p, path, &st);
    if (r->t.groups->world_rank == 0) {
        char line[80];
        int n = snprintf(line, sizeof line, "%s\n", name);
        char *latest = join(r->dir, LATEST);
        atomic_write_file(latest, line, (size_t)n);
        free(latest);
        prune(r, name);
        printf("fabula: checkpoint: saved step %ld to %s (%.1f MB in %.2f s, %.0f MB/s; tensor writes: %lld "
               "collective, %lld independent)\n", p->step, path, st.bytes / 1e6, st.seconds,
               st.bytes / 1e6 / (st.seconds > 0 ? st.seconds : 1e-9), st.collective, st.independent);
        fflush(stdout);
    }
    /* the save is over for everyone only when `latest` names it */
    comm_barrier(comm_world());
    free(path);
    r->last_saved = p->step;
}

void ckpt_policy_step_done(ckpt_policy_t *r, const ckpt_progress_t *p)
{
    if (r->interval > 0 && p->step % r->interval == 0 && p->step != r->last_saved)
        save(r, p);
}

void ckpt_policy_save_final(ckpt_policy_t *r, const ckpt_progress_t *p)
{
    if (r->interval >= 0 && p->step != r->last_saved)
        save(r, p);
}

void ckpt_policy_save(ckpt_policy_t *r, const ckpt_progress_t *p)
{
    if (p->step != r->last_saved)
        save(r, p);
}

/* ------------------------------------------------------------ resuming */

/* Rank 0's text (candidates, one per line) to every rank. */
static char *bcast_text(char *text)
{
    long long len = text ? (long long)strlen(text) + 1 : 0;
    comm_bcast(comm_world(), &len, sizeof len, 0);
    if (parallel_rank() != 0) {
        free(text);
        text = fb_calloc((size_t)len + 1, 1);
    }
    if (len > 0)
        comm_bcast(comm_world(), text, (size_t)len, 0);
    return text;
}

static void append_line(char **text, size_t *len, const char *line)
{
    size_t n = strlen(line);
    *text = fb_realloc(*text, *len + n + 2);
    memcpy(*text + *len, line, n);
    (*text)[*len + n] = '\n';
    *len += n + 1;
    (*text)[*len] = '\0';
}

/* Rank 0, run.resume "auto": `latest` first, then every other checkpoint by
 * step, newest first. */
static char *auto_candidates(const ckpt_policy_t *r)
{
    char *text = fb_strdup("");
    size_t len = 0;
    int n;
    entry_t *e = list_checkpoints(r->dir, &n, 1);
    char *latest_path = join(r->dir, LATEST);
    char first[256] = "";
    FILE *f = open_run_file(latest_path);
    if (f) {
        if (!fgets(first, sizeof first, f))
            first[0] = '\0';
        fclose(f);
        size_t l = strlen(first);
        while (l > 0 && isspace((unsigned char)first[l - 1]))
            first[--l] = '\0';
        char *p = l ? join(r->dir, first) : NULL;
        if (p && access(p, F_OK) == 0 && !strchr(first, '/')) {
            append_line(&text, &len, p);
        } else {
            fb_warn("checkpoint: %s names '%s', which is not a checkpoint in %s; %s", latest_path, first, r->dir,
                    n > 0 ? "falling back to the newest checkpoint there" : "there is none: starting from step 0");
            first[0] = '\0';
        }
        free(p);
    }
    for (int i = 0; i < n; i++) {
        if (!strcmp(e[i].name, first))
            continue;
        char *p = join(r->dir, e[i].name);
        append_line(&text, &len, p);
        free(p);
    }
    free(latest_path);
    free_entries(e, n);
    return text;
}

/* Rank 0: drops the records of steps after `step`, the one this run starts
 * from (logged by a run that went on past its last checkpoint, or by an
 * earlier run in this directory), and any torn last line, so that the log
 * reads as one run. */
static void trim_metrics(const char *run_dir, long step)
{
    char *path = join(run_dir, "metrics.jsonl");
    FILE *f = open_run_file(path);
    if (!f) {
        free(path);
        return;
    }
    char *kept = fb_strdup("");
    size_t len = 0, dropped = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        json_error_t err;
        json_t *j = line[got - 1] == '\n' ? json_loads(line, 0, &err) : NULL;
        json_t *s = j ? json_object_get(j, "step") : NULL;
        if (j && (!json_is_integer(s) || json_integer_value(s) <= step)) {
            line[got - 1] = '\0';
            append_line(&kept, &len, line);
        } else {
            dropped++;
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (dropped) {
        atomic_write_file(path, kept, len);
        printf("fabula: checkpoint: %s: removed %zu record(s) after step %ld, logged by an earlier run past the "
               "step this one starts from\n", path, dropped, step);
    }
    free(kept);
    free(path);
}

/* Rank 0: the last step RUN_DIR/metrics.jsonl records (0: none, or no file). */
static long last_logged_step(const char *run_dir)
{
    char *path = join(run_dir, "metrics.jsonl");
    FILE *f = open_run_file(path);
    free(path);
    if (!f)
        return 0;
    long last = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        json_t *s = j ? json_object_get(j, "step") : NULL;
        if (json_is_integer(s) && json_integer_value(s) > last)
            last = (long)json_integer_value(s);
        json_decref(j);
    }
    free(line);
    fclose(f);
    return last;
}

/* Rank 0: a damaged checkpoint is renamed "<name>.damaged", out of the way
 * of later resumes and of keep_last, and kept for inspection. */
static void quarantine(const char *path)
{
    size_t n = strlen(path) + sizeof ".damaged";
    char *to = fb_malloc(n);
    snprintf(to, n, "%s.damaged", path);
    if (rename(path, to) == 0)
        printf("fabula: checkpoint: damaged %s renamed to %s\n", path, to);
    else
        fb_warn("checkpoint: cannot rename damaged %s to %s: %s", path, to, strerror(errno));
    free(to);
}

/* Loads one candidate; prints the result on rank 0. */
static int try_load(ckpt_policy_t *r, const char *path, ckpt_progress_t *p, char *why, size_t why_len)
{
    ckpt_io_stats_t st;
    if (ckpt_read(&r->t, path, p, why, why_len, &st) != 0)
        return -1;
    if (r->t.groups->world_rank == 0) {
        printf("fabula: checkpoint: resumed from %s at step %ld, %lld tokens seen (%.1f MB in %.2f s, %.0f MB/s; "
               "tensor reads: %lld collective, %lld independent)\n", path, p->step, p->tokens_seen, st.bytes / 1e6,
               st.seconds, st.bytes / 1e6 / (st.seconds > 0 ? st.seconds : 1e-9), st.collective, st.independent);
        fflush(stdout);
    }
    r->last_saved = p->step;
    return 0;
}

void ckpt_policy_resume(ckpt_policy_t *r, ckpt_progress_t *p)
{
    const config_t *cfg = r->t.cfg;
    const int rank0 = r->t.groups->world_rank == 0;
    memset(p, 0, sizeof *p);
    const char *mode = cfg->run.resume;
    char why[1024];
    if (!strcmp(mode, "none")) {
        if (rank0) {
            printf("fabula: checkpoint: run.resume = \"none\": starting from step 0\n");
            trim_metrics(cfg->run.run_dir, 0);
        }
        return;
    }
    if (strcmp(mode, "auto") != 0) {
        int err = rank0 && access(mode, R_OK) != 0 ? errno : 0;
        comm_bcast(comm_world(), &err, sizeof err, 0);
        if (err)
            fb_fatal_all(FB_EXIT_IO, "run.resume = '%s': cannot open: %s", mode, strerror(err));
        if (try_load(r, mode, p, why, sizeof why) != 0)
            fb_fatal_all(FB_EXIT_DATA, "run.resume = '%s': the checkpoint is damaged: %s", mode, why);
        if (rank0)
            trim_metrics(cfg->run.run_dir, p->step);
        return;
    }

    char *text = bcast_text(rank0 ? auto_candidates(r) : NULL);
    int tried = 0;
    for (char *s = text, *nl; *s; s = nl + 1) {
        nl = strchr(s, '\n');
        FB_ASSERT(nl);
        *nl = '\0';
        tried++;
        if (try_load(r, s, p, why, sizeof why) == 0) {
            /* only now, with a good one found: if every checkpoint were
             * damaged they stay as they are and the run stops */
            for (char *d = text; rank0 && d != s; d += strlen(d) + 1)
                quarantine(d);
            free(text);
            if (rank0)
                trim_metrics(cfg->run.run_dir, p->step);
            return;
        }
        if (rank0)
            fb_warn("checkpoint: %s is damaged (%s); trying the previous checkpoint", s, why);
    }
    free(text);
    memset(p, 0, sizeof *p);
    if (tried > 0)
        fb_fatal_all(FB_EXIT_DATA, "no usable checkpoint in %s: all %d are damaged (see above); set run.resume = "
                     "\"none\" to start from step 0, or run.resume to a checkpoint from elsewhere", r->dir, tried);
    /* No checkpoint, but a log: a run that finished without checkpoints is
     * refused rather than silently started over over its metrics; a run cut
     * before its first checkpoint (requeued) starts over, saying so. */
    long logged = rank0 ? last_logged_step(cfg->run.run_dir) : 0;
    comm_bcast(comm_world(), &logged, sizeof logged, 0);
    if (logged >= cfg->run.steps)
        fb_fatal_all(FB_EXIT_USAGE, "%s/metrics.jsonl records a finished run (%ld steps; run.steps = %ld) and %s "
                     "holds no checkpoint to resume from: set run.resume = \"none\" to start over (its metrics are "
                     "then replaced), or give this run its own --run-dir", cfg->run.run_dir, logged, cfg->run.steps,
                     r->dir);
    if (rank0) {
        if (logged > 0)
            printf("fabula: checkpoint: none in %s: starting from step 0; the %ld step(s) %s/metrics.jsonl logged "
                   "without a checkpoint are discarded\n", r->dir, logged, cfg->run.run_dir);
        else
            printf("fabula: checkpoint: none in %s: starting from step 0\n", r->dir);
        trim_metrics(cfg->run.run_dir, 0);
    }
}
