/* `fabula eval`'s three jobs, each from its parsed options: a checkpoint's
 * loss, a Hugging Face directory's loss, one sequence's logits. Each
 * returns the exit code; MPI is started. */
#ifndef FABULA_TRAIN_EVAL_RUN_H
#define FABULA_TRAIN_EVAL_RUN_H

#include <stdint.h>

/* The loss of checkpoint ckpt on the first `samples` (0: its config's
 * run.eval_samples) of the validation (valid) or training split of
 * `corpus` (NULL: its config's data.corpus). */
int eval_run_checkpoint(const char *ckpt, const char *corpus, long long samples, int valid);
/* The loss of the weights of Hugging Face directory `dir` on `corpus`
 * made with `tokenizer`. */
int eval_run_model(const char *dir, const char *corpus, const char *tokenizer, int valid, long long samples);
/* The fp32 logits of ids[0..T) from ckpt or model (one of them), written
 * to `out` as .npy; one rank. */
int eval_run_logits(const char *ckpt, const char *model, const int32_t *ids, int T, const char *out);

#endif
