/* A finished (or running) run directory as the report reads it: the
 * effective config and every line of metrics.jsonl (docs/run-dir.md).
 * One process, no MPI; nothing here writes. */
#ifndef FABULA_REPORT_RUN_DATA_H
#define FABULA_REPORT_RUN_DATA_H

#include <jansson.h>
#include <stddef.h>

typedef struct report_run {
    char *dir;
    json_t *config;  /* config.json, NULL when the directory has none */
    json_t **steps;  /* one object per metrics.jsonl line, in file order */
    size_t nsteps;
    json_t **jobs;   /* jobs.jsonl's lines (docs/run-dir.md), in order; none without the file */
    size_t njobs;
    /* 1 where a process's records start: the first line, each line whose
     * step does not follow the one before or whose "elapsed" (a process's
     * own clock) is below the one before, and each line of step S + 1 for
     * a start line of jobs.jsonl at step S: a resumed job */
    unsigned char *first;
} report_run_t;

/* Reads RUN_DIR. A missing directory or metrics.jsonl, or a line that is not
 * a JSON object with a numeric "step", is an error (fb_fatal: FB_EXIT_IO for
 * what cannot be read, FB_EXIT_DATA for what is not a run's log). A last
 * line cut short (a run killed mid-write) is skipped with a warning; so is
 * a line of jobs.jsonl that is not a JSON object. */
void report_run_load(report_run_t *r, const char *dir);
void report_run_free(report_run_t *r);

/* The node at a dotted path ("ranks.rss_max_bytes") of `obj`, NULL when
 * absent or when something on the way is not an object. */
json_t *report_get(json_t *obj, const char *path);

/* "DIR/NAME", newly allocated (freed by the caller). */
char *report_path_join(const char *dir, const char *name);
/* The number at `path` in *out; 0 when absent or not a number. */
int report_num(json_t *obj, const char *path, double *out);

/* The run's world size: "ranks.world" of any line, else the effective
 * config's train_batch_size / (micro * gas) (DeepSpeed's triple resolved
 * for the world it ran on); 0 when neither says. */
int report_world(const report_run_t *r);

/* Whether line i is a process's first step (report_run_t.first), which the
 * throughput figures leave out as warm-up. */
int report_is_warmup(const report_run_t *r, size_t i);

/* The steps after which another process took over (the last step before
 * each process's first record, the first process's excepted): where the run
 * resumed. A new array (freed by the caller); returns how many. */
size_t report_resumes(const report_run_t *r, double **steps);

/* The seconds of training over every process: the sum of each process's
 * last "elapsed" (each counts from its own start). *processes: how many. */
double report_elapsed_total(const report_run_t *r, size_t *processes);

/* The throughput over the measured (non-warm-up) steps: sum of "tokens" over
 * sum of "step_time". When every line is warm-up (a run of one step) all
 * lines count. 0 when the run has no timed step. *nsteps: steps counted. */
double report_tokens_per_s(const report_run_t *r, size_t *nsteps);

/* The largest resident set of any rank: "ranks.rss_max_bytes" of the
 * gather steps, else rank 0's "rss_bytes"; NaN when neither is recorded. */
double report_memory_bytes(const report_run_t *r);

/* The lines that have a number at `path`: their steps in *x and the values
 * in *y (new arrays, freed by the caller); returns how many. */
size_t report_series(const report_run_t *r, const char *path, double **x, double **y);

/* The measured steps' (non-warm-up, as report_tokens_per_s) sum of the
 * number at `path`, and in *wall the sum of step_time + time.checkpoint
 * over the same lines (a save is timed outside the step, with the next
 * one); returns how many lines. */
size_t report_sum_measured(const report_run_t *r, const char *path, double *sum, double *wall);

/* The checkpoint files of the run: checkpoint.dir of config.json, else
 * RUN_DIR/checkpoints. Sorted names of step-*.h5 (and *.damaged), their
 * sizes, and what `latest` names ("" if none). */
typedef struct report_ckpts {
    char *dir;
    char **names;
    double *bytes;
    size_t n;
    char latest[256];
} report_ckpts_t;
void report_ckpts_list(const report_run_t *r, report_ckpts_t *c);
void report_ckpts_free(report_ckpts_t *c);

/* A short name for a run in legends: the last component of its path. */
const char *report_run_name(const report_run_t *r);

#endif
