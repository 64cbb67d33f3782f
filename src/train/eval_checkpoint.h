/* `fabula eval`: the validation loss of a checkpoint, offline, on any
 * number of ranks: the weights are loaded alone (no optimizer step, no data
 * position), then the same evaluate_split the training runs. */
#ifndef FABULA_TRAIN_EVAL_CHECKPOINT_H
#define FABULA_TRAIN_EVAL_CHECKPOINT_H

#include "config/config.h"

/* Collective. `cfg` is the checkpoint's own config with the layout of this
 * job; `valid`: the validation split of data.corpus, else the training
 * samples; the first `samples` of them. Rank 0 prints one row per genre
 * (samples, target tokens, loss, perplexity) and the total. Returns the
 * exit code; bad input ends the job with the documented code. */
/* ckpt_path NULL: the weights of cfg->init_from (`fabula eval --model`). */
int eval_checkpoint(const config_t *cfg, const char *ckpt_path, long ckpt_step, int valid, long samples);

#endif
