/* `fabula eval --tokens IDS --logits-out FILE`: the fp32 logits of one
 * sequence, from a checkpoint or a Hugging Face directory. */
#ifndef FABULA_TRAIN_EVAL_LOGITS_H
#define FABULA_TRAIN_EVAL_LOGITS_H

#include <stdint.h>

#include "config/config.h"

/* The logits [T, *vocab] (malloc'd, row-major) of ids[0..T) as one sample
 * at positions 0..T-1, every id checked against the vocabulary (exit 2).
 * _checkpoint: serial, the checkpoint's weights alone (ckpt_read_weights)
 * on the backend of its config (a 1-rank job's); _model: serial, from DIR
 * (hf_import_config and hf_import_weights), on the fp32 CPU kernels. Both
 * into a forward-only model (plain_model_create). */
float *eval_logits_checkpoint(const config_t *cfg, const char *ckpt_path, const int32_t *ids, int T, int *vocab);
float *eval_logits_model(const char *dir, const int32_t *ids, int T, int *vocab);

#endif
