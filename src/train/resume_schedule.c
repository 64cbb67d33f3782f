#include "train/resume_schedule.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "io/regular_file.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"
#include "zero/schedule.h"

/* Rank 0: the checkpoint the resume will start from, as run.resume names
 * it: the file itself, or the one checkpoint.dir/latest names ("auto";
 * should that one be damaged the resume falls back to an older one of the
 * same run). NULL: none. */
static char *designated(const config_t *cfg)
{
    const char *mode = cfg->run.resume;
    if (!strcmp(mode, "none"))
        return NULL;
    if (strcmp(mode, "auto") != 0)
        return fb_strdup(mode);
    size_t n = strlen(cfg->checkpoint.dir) + 16;
    char *latest = fb_malloc(n);
    snprintf(latest, n, "%s/latest", cfg->checkpoint.dir);
    /* not fopen: a FIFO there would block the start (the run refuses it,
     * exit 3, when it resumes) */
    FILE *f = NULL;
    char why[512];
    const int bad = regular_file_fopen(latest, &f, why, sizeof why);
    free(latest);
    if (bad || !f)
        return NULL;
    char name[256] = "";
    if (!fgets(name, sizeof name, f))
        name[0] = '\0';
    fclose(f);
    size_t l = strlen(name);
    while (l > 0 && isspace((unsigned char)name[l - 1]))
        name[--l] = '\0';
    if (!l || strchr(name, '/'))
        return NULL;
    n = strlen(cfg->checkpoint.dir) + l + 2;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/%s", cfg->checkpoint.dir, name);
    return path;
}

char *train_resume_point(const config_t *cfg, long *step, char *why, size_t why_len)
{
    *step = 0;
    why[0] = '\0';
    char *path = designated(cfg), *text = NULL;
    if (!path)
        return NULL;
    if (ckpt_read_config(path, &text, step, why, why_len) != 0) {
        free(path);
        return NULL;
    }
    free(text);
    return path;
}

/* Rank 0 reads, every rank gets: the saved config text (NULL when none)
 * and the step. */
static char *saved_config(const config_t *cfg, long *step, char **path)
{
    char *text = NULL;
    long long len = 0;
    *step = 0;
    *path = NULL;
    if (parallel_rank() == 0) {
        *path = designated(cfg);
        char why[1024];
        if (*path && access(*path, R_OK) == 0 && ckpt_read_config(*path, &text, step, why, sizeof why) != 0)
            text = NULL;
        len = text ? (long long)strlen(text) + 1 : 0;
    }
    comm_bcast(comm_world(), &len, sizeof len, 0);
    comm_bcast(comm_world(), step, sizeof *step, 0);
    if (len == 0) {
        free(text);
        return NULL;
    }
    if (parallel_rank() != 0)
        text = fb_calloc((size_t)len + 1, 1);
    comm_bcast(comm_world(), text, (size_t)len, 0);
    return text;
}

/* The optimizer and schedule of a saved effective config: its own blocks
 * read again (they are complete there), over the default for the rest. */
static int saved_schedule(const char *text, config_t *old)
{
    json_error_t err;
    json_t *saved = json_loads(text, 0, &err);
    if (!saved)
        return -1;
    json_t *root = json_object();
    FB_ASSERT(root);
    static const char *const keep[] = {"optimizer", "scheduler"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(saved, keep[i]);
        if (v)
            FB_ASSERT(json_object_set(root, keep[i], v) == 0);
    }
    json_t *steps = json_object_get(json_object_get(saved, "run"), "steps");
    if (json_is_integer(steps))
        FB_ASSERT(json_object_set_new(root, "run", json_pack("{s:O}", "steps", steps)) == 0);
    json_decref(saved);
    config_load_object(old, root, NULL, 0, 1, 0);
    json_decref(root);
    return 0;
}

static const char *sched_name(sched_type_t t)
{
    return t == SCHED_WARMUP_LR         ? "WarmupLR"
           : t == SCHED_WARMUP_DECAY_LR ? "WarmupDecayLR"
           : t == SCHED_WARMUP_COSINE_LR ? "WarmupCosineLR"
                                         : "none (constant lr)";
}

/* "KEY a -> b" for each schedule setting that differs, into buf. */
static void differences(const config_t *old, const config_t *now, char *buf, size_t n)
{
    const sched_config_t *a = &old->sched, *b = &now->sched;
    size_t at = 0;
    buf[0] = '\0';
#define DIFF(cond, ...)                                                                                         \
    do {                                                                                                        \
        if ((cond) && at < n)                                                                                   \
            at += (size_t)snprintf(buf + at, n - at, "%s", at ? ", " : "");                                     \
        if ((cond) && at < n)                                                                                   \
            at += (size_t)snprintf(buf + at, n - at, __VA_ARGS__);                                              \
    } while (0)
    DIFF(a->type != b->type, "scheduler.type %s -> %s", sched_name(a->type), sched_name(b->type));
    DIFF(old->optim.lr != now->optim.lr, "optimizer.params.lr %g -> %g", old->optim.lr, now->optim.lr);
    DIFF(a->type == b->type && a->total_num_steps != b->total_num_steps, "scheduler.params.total_num_steps %ld -> %ld",
         a->total_num_steps, b->total_num_steps);
    DIFF(a->type == b->type && a->warmup_num_steps != b->warmup_num_steps,
         "scheduler.params.warmup_num_steps %ld -> %ld", a->warmup_num_steps, b->warmup_num_steps);
    DIFF(a->type == b->type && a->warmup_max_lr != b->warmup_max_lr, "scheduler.params.warmup_max_lr %g -> %g",
         a->warmup_max_lr, b->warmup_max_lr);
    DIFF(a->type == b->type && a->warmup_min_lr != b->warmup_min_lr, "scheduler.params.warmup_min_lr %g -> %g",
         a->warmup_min_lr, b->warmup_min_lr);
#undef DIFF
}

void train_resume_schedule(const config_t *cfg, int verbose)
{
    long step;
    char *path;
    char *text = saved_config(cfg, &step, &path);
    config_t old;
    if (!text || step <= 0 || saved_schedule(text, &old) != 0) {
        free(text);
        free(path);
        return;
    }
    free(text);
    char diff[512];
    differences(&old, cfg, diff, sizeof diff);
    if (verbose && diff[0]) {
        const double lr_saved = schedule_lr(&old.sched, &old.optim, step);
        const double lr_now = schedule_lr(&cfg->sched, &cfg->optim, step);
        const char *where = path ? path : cfg->run.resume;
        /* a horizon this run did not write, moved by another --steps: the
         * change the user may not know they made */
        const int moved = cfg->sched.total_follows_steps && old.sched.type == cfg->sched.type &&
                          old.sched.total_num_steps != cfg->sched.total_num_steps;
        if (moved)
            fb_warn("resuming from %s at step %ld with another learning-rate schedule than the checkpoint's: %s (it "
                    "follows run.steps = %ld): the lr of step %ld is %.4g where the checkpoint's schedule gives %.4g, "
                    "and the later ones differ too; --set scheduler.params.total_num_steps=%ld keeps the "
                    "checkpoint's schedule",
                    where, step, diff, cfg->run.steps, step + 1, lr_now, lr_saved, old.sched.total_num_steps);
        else
            printf("fabula: note: resuming from %s at step %ld with the learning-rate schedule this config gives "
                   "(%s): the lr of step %ld is %.4g where the checkpoint's schedule gives %.4g\n",
                   where, step, diff, step + 1, lr_now, lr_saved);
        fflush(stdout);
    }
    config_free(&old);
    free(path);
}
