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
} report_run_t;

/* Reads RUN_DIR. A missing directory or metrics.jsonl, or a line that is not
 * a JSON object with a numeric "step", is an error (fb_fatal: FB_EXIT_IO for
 * what cannot be read, FB_EXIT_DATA for what is not a run's log). A last
 * line cut short (a run killed mid-write) is skipped with a warning. */
void report_run_load(report_run_t *r, const char *dir);
void report_run_free(report_run_t *r);

/* The node at a dotted path ("ranks.rss_max_bytes") of `obj`, NULL when
 * absent or when something on the way is not an object. */
json_t *report_get(json_t *obj, const char *path);
/* The number at `path` in *out; 0 when absent or not a number. */
int report_num(json_t *obj, const char *path, double *out);

/* The run's world size: "ranks.world" of any line, else the effective
 * config's train_batch_size / (micro * gas) (DeepSpeed's triple resolved
 * for the world it ran on); 0 when neither says. */
int report_world(const report_run_t *r);

/* Whether line i is a process's first step, which the throughput figures
 * leave out as warm-up: the file's first line, and every line whose step is
 * not the previous line's step + 1 (a resumed run appends to the file). */
int report_is_warmup(const report_run_t *r, size_t i);

/* The throughput over the measured (non-warm-up) steps: sum of "tokens" over
 * sum of "step_time". When every line is warm-up (a run of one step) all
 * lines count. 0 when the run has no timed step. *nsteps: steps counted. */
double report_tokens_per_s(const report_run_t *r, size_t *nsteps);

#endif
