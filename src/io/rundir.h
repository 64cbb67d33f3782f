/* The run directory: the effective config beside an append-only JSONL log
 * of per-step metrics. Only rank 0 touches it. */
#ifndef FABULA_IO_RUNDIR_H
#define FABULA_IO_RUNDIR_H

#include <jansson.h>

/* Creates `dir` (mkdir -p) and writes dir/config.json atomically with the
 * merged, completed configuration, so a run directory always says what ran. */
void rundir_prepare(const char *dir, const char *effective_json);

/* Takes the run directory's lock (dir/.lock, a POSIX record lock on the
 * whole file) for the rest of this process's life and writes the holder's
 * "host H pid P" into it. The kernel releases the lock when the process
 * ends, however it ends, so a killed job never leaves a stale lock behind.
 * Returns 1 when taken; 0 when another live process holds it, with what the
 * holder wrote copied into `holder` (at most `holder_size` bytes, ended).
 * Creates `dir` first if needed. Calling it again in the same process
 * returns 1 without touching the file. */
int rundir_lock(const char *dir, char *holder, size_t holder_size);

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
