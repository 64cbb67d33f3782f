/* The run directory: the effective config beside an append-only JSONL log
 * of per-step metrics. Only rank 0 touches it. */
#ifndef FABULA_IO_RUNDIR_H
#define FABULA_IO_RUNDIR_H

#include <jansson.h>

/* Creates `dir` (mkdir -p) and writes dir/config.json atomically with the
 * merged, completed configuration, so a run directory always says what ran. */
void rundir_prepare(const char *dir, const char *effective_json);

typedef struct metrics metrics_t;

/* Opens dir/metrics.jsonl for appending (a resumed run continues the file). */
metrics_t *metrics_open(const char *dir);

/* Appends `record` as one compact line (keys in insertion order, reals with
 * 9 significant digits) and flushes it, so a killed run loses no line it
 * reported. Does not take ownership of `record`. */
void metrics_write(metrics_t *m, json_t *record);

/* Flushes and closes; NULL is ignored. */
void metrics_close(metrics_t *m);

#endif
