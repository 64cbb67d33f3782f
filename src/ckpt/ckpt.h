/* Checkpoints: the whole training state in one HDF5 file, written by all
 * ranks together through MPI-IO and readable at any layout (any number of
 * ranks, any ZeRO stage, any expert-parallel size). docs/checkpoint.md
 * describes the file; this header is the one-file level (write one, read
 * one); src/train/ckpt_policy.h is the policy around it (when, where, which, how many).
 *
 * Every named parameter is stored whole, under its Hugging Face name and
 * shape, as are the two Adam moments: each rank writes (and reads) by
 * hyperslab only the part of each tensor that falls in its ZeRO shard, so
 * no rank ever holds a whole tensor it does not own. */
#ifndef FABULA_IO_CKPT_H
#define FABULA_IO_CKPT_H

#include <stddef.h>

#include "config/config.h"
#include "ops.h"
#include "parallel/groups.h"
#include "zero/loss_scale.h"
#include "loader/step_plan.h"
#include "zero/zero.h"

#define CKPT_FORMAT_NAME "fabula-checkpoint"
#define CKPT_FORMAT_VERSION 1

/* The state a checkpoint covers, by reference. */
typedef struct ckpt_target {
    const config_t *cfg;
    zero_t *zero;           /* parameters, moments, optimizer step count */
    const ops_t *ops;       /* the backend of zero's buffers */
    step_plan_t *plan;      /* sampler, curriculum, deferred samples; NULL on read: the
                             * weights alone (`fabula eval`: no data position to fit) */
    const groups_t *groups; /* the layout, recorded for information */
    loss_scale_t *scaler;   /* fp16 loss scaler (saved, restored); NULL: none */
} ckpt_target_t;

/* Counters kept beside the state. */
typedef struct ckpt_progress {
    long step;              /* optimizer steps done: the global step */
    long long tokens_seen;  /* training tokens of those steps, all ranks */
} ckpt_progress_t;

typedef struct ckpt_io_stats {
    double bytes;           /* size of the file */
    double seconds;         /* wall time of the whole save or load */
    long long collective;   /* tensor transfers every rank joined (the most on one rank) */
    long long independent;  /* tensor transfers one rank made alone (the most on one rank) */
} ckpt_io_stats_t;

/* Collective. Writes the state after p->step steps to `path`: first to a
 * temporary name beside it, closed, fsynced, renamed, the directory fsynced,
 * so that `path` is either absent or complete. Any failure (disk full, ...)
 * removes the temporary file and ends the job with FB_EXIT_IO. */
void ckpt_write(const ckpt_target_t *t, const ckpt_progress_t *p, const char *path, ckpt_io_stats_t *st);

/* Collective. Loads `path` into the state (each rank reads its shard, then
 * the replicated copies are rebuilt) and fills *p. Returns 0 when loaded.
 * A damaged file (not openable, truncated, a checksum that does not match)
 * returns -1 on every rank with the reason in why[0..why_len), naming the
 * first damaged tensor; the state may then be partly overwritten: load
 * another checkpoint or stop. A whole file that does not fit this run
 * (another format or a newer version, other tensor names or shapes, other
 * data) ends the job with FB_EXIT_DATA naming what differs. */
int ckpt_read(const ckpt_target_t *t, const char *path, ckpt_progress_t *p, char *why, size_t why_len,
              ckpt_io_stats_t *st);

/* Serial (one process, no MPI needed): prints the metadata and the tensor
 * table of `path` (`fabula ckpt info`); with `print_config` also the
 * effective config saved in it. Returns an exit code (0, or FB_EXIT_DATA for
 * a file that is not a checkpoint). */
int ckpt_info(const char *path, int print_config);

/* Serial: the effective config saved in `path` (a new string in
 * *config_json) and its step. Returns 0, FB_EXIT_IO when the file cannot be
 * read, FB_EXIT_DATA when it is not a checkpoint this fabula reads; the
 * reason in why[0..why_len). */
int ckpt_read_config(const char *path, char **config_json, long *step, char *why, size_t why_len);
/* Serial: whether `path` holds every parameter of the model `mc` (the
 * config the checkpoint carries) at its shape, with its bytes stored, for
 * a command to check before it allocates that model. Returns 0, or
 * FB_EXIT_DATA with the tensor and the reason in why[0..why_len). */
int ckpt_check_model(const char *path, const model_config_t *mc, char *why, size_t why_len);
/* Serial: recomputes every tensor's checksum (`fabula ckpt verify`).
 * Prints one line per damaged tensor and a summary; returns 0 when all
 * match, FB_EXIT_DATA otherwise (including a file HDF5 cannot open). */
int ckpt_verify(const char *path, int quiet);

#endif
