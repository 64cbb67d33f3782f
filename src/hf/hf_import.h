/* Hugging Face models in: a transformers save_pretrained directory (a
 * Llama or Mixtral config.json and its safetensors, one file or sharded
 * with model.safetensors.index.json) as fabula's model config and initial
 * weights (docs/init-from.md). */
#ifndef FABULA_HF_HF_IMPORT_H
#define FABULA_HF_HF_IMPORT_H

#include <stddef.h>

#include "config/config.h"
#include "model/model.h"
#include "model/params.h"
#include "zero/zero.h"

/* Serial: reads DIR/config.json into *mc (the same mapping and refusals as a
 * "model": "config.json" section) and checks DIR's weight headers against
 * it (hf_weights_open), so that no model is sized by a config its weights
 * do not match. Exits with the documented code and a message naming the
 * file on bad input. */
void hf_import_config(const char *dir, model_config_t *mc);
/* Serial: copies every tensor of DIR's safetensors (sharded or not,
 * fp32/bf16/fp16) into a whole (ep 1, full buffers) model_t created for that
 * config; refuses missing/extra/mis-shaped tensors. */
void hf_import_weights(const char *dir, model_t *m);

/* DIR's weight files, opened and checked against a model config (every
 * tensor of its ep-1 table present with its shape, none left over; the
 * embedding and lm_head have DIR/config.json's vocab_size rows, as
 * transformers requires, and mc->vocab_size may be larger: the rows past
 * the file's are the mean of the file's rows). Only headers are read.
 * Returns 0, or the exit code with why[cap] naming the file and the
 * tensor; identical on every rank, so the caller may fb_fatal_all. */
typedef struct hf_weights hf_weights_t;
int hf_weights_open(hf_weights_t **out, const char *dir, const model_config_t *mc, char *why, size_t cap);
/* Elements [lo, hi) of view v (which names a tensor of the config's model;
 * a tensor-parallel slice of it: its own elements, param_view_full_pos)
 * into dst[hi - lo]: a pread of just those bytes (one per row of a column
 * slice), widened exactly to fp32. */
int hf_weights_read(hf_weights_t *w, const param_view_t *v, size_t lo, size_t hi, float *dst, char *why,
                    size_t cap);
void hf_weights_close(hf_weights_t *w);
/* Every view of m's table (an expert-parallel rank's experts, a
 * tensor-parallel slice: hf_weights_read's) from w into m's parameters,
 * for a model that owns its parameter buffers (a forward-only one:
 * `fabula eval --model`). A read error ends the process. */
void hf_weights_load(hf_weights_t *w, model_t *m);
/* hf_weights_read as ZeRO's init source (a read error ends the job). */
zero_init_source_t hf_weights_source(hf_weights_t *w);

#endif
