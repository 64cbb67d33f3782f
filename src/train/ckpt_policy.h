/* The checkpoint policy of a training run (docs/checkpoint.md): where
 * checkpoints go (checkpoint.dir: step-00001000.h5 files and a `latest`
 * pointer), when (every checkpoint.save_interval steps, at the end, on
 * preemption), how many stay (checkpoint.keep_last), and where a run starts
 * (run.resume: "auto" = `latest` if there is one, falling back to older
 * checkpoints past damaged ones; "none"; or a file). Every function is
 * collective over the world; rank 0 does the directory work and prints. */
#ifndef FABULA_IO_CKPT_RUN_H
#define FABULA_IO_CKPT_RUN_H

#include "ckpt/ckpt.h"

typedef struct ckpt_policy {
    ckpt_target_t t;
    const char *dir;
    long interval;
    int keep_last;
    long last_saved;        /* step of the checkpoint last written or loaded; -1: none */
} ckpt_policy_t;

void ckpt_policy_init(ckpt_policy_t *r, const ckpt_target_t *t);

/* Loads the checkpoint run.resume designates, if any, and fills *p (step 0,
 * no tokens: starting fresh). Rank 0 removes temporary files a killed save
 * left in the directory and cuts RUN_DIR/metrics.jsonl back to the resumed
 * step. Damaged checkpoints under "auto": a warning each, then the previous
 * one; none usable: exit FB_EXIT_DATA. A damaged or unreadable explicit
 * file: exit FB_EXIT_DATA / FB_EXIT_IO. */
void ckpt_policy_resume(ckpt_policy_t *r, ckpt_progress_t *p);

/* After each step: saves when p->step is a multiple of save_interval. */
void ckpt_policy_step_done(ckpt_policy_t *r, const ckpt_progress_t *p);

/* Saves now (preemption) unless p->step is saved already: the file, then
 * `latest`, then the checkpoints beyond keep_last removed. */
void ckpt_policy_save(ckpt_policy_t *r, const ckpt_progress_t *p);
/* At the end of the run: as ckpt_policy_save, unless save_interval is -1. */
void ckpt_policy_save_final(ckpt_policy_t *r, const ckpt_progress_t *p);

/* "step-00001000.h5" -> 1000; -1 for any other name. */
long ckpt_policy_parse_name(const char *name);

#endif
