/* `fabula export`: a checkpoint as a Hugging Face model directory that
 * transformers loads unchanged (docs/export.md): config.json
 * (LlamaForCausalLM or MixtralForCausalLM), generation_config.json,
 * model.safetensors (or shards and model.safetensors.index.json) and the
 * tokenizer's three files. Serial: one process reads the checkpoint tensor
 * by tensor, so memory is bounded by the largest tensor. */
#ifndef FABULA_HF_HF_EXPORT_H
#define FABULA_HF_HF_EXPORT_H

#include <stdint.h>

#include "config/config.h"

enum { HF_DTYPE_F32 = 0, HF_DTYPE_BF16, HF_DTYPE_F16 };

typedef struct hf_export_opts {
    const char *checkpoint;
    const char *output;
    const char *tokenizer;     /* NULL: the checkpoint's data.tokenizer */
    int dtype;                 /* HF_DTYPE_* */
    uint64_t max_shard_bytes;  /* a shard's tensor bytes at most (one larger tensor: a shard alone) */
    int force;                 /* replace an existing output directory's files */
    int allow_dropless;        /* export a capacity-dropping MoE as dropless Mixtral */
    int quiet;                 /* no progress lines */
} hf_export_opts_t;

/* Does the whole export; ends the process with the documented exit code
 * and a message naming the file or the feature on any problem. */
void hf_export(const hf_export_opts_t *o);
/* --tokenizer against the tokenizer the checkpoint was trained with (its
 * saved config's data.tokenizer, or its corpus's record): a tokenizer.json
 * of another vocabulary would turn the model's ids into other text (fatal,
 * exit 3). An unreadable checkpoint is left for hf_export to report. */
void hf_export_check_tokenizer(const hf_export_opts_t *o);
/* After hf_export failed under fb_catch: removes the shards it was writing. */
void hf_export_abandon(void);

/* ---- hf_config_write.c ---- */

/* The model section of a checkpoint's effective config (its JSON text):
 * every key fabula wrote, read into *mc; data.tokenizer in *tokenizer (a
 * new string). A missing or mistyped key: FB_EXIT_DATA naming `ckpt`. */
void hf_model_from_config(const char *ckpt, const char *config_json, model_config_t *mc, char **tokenizer);

/* Refuses (FB_EXIT_USAGE, naming the key and why) a model Llama/Mixtral
 * cannot compute exactly; prints a note for what only training sees. */
void hf_model_check(const char *ckpt, const model_config_t *mc, int allow_dropless, int quiet);

/* config.json for mc (a new string): LlamaForCausalLM when dense,
 * MixtralForCausalLM when MoE. Token ids < 0 are written as null. */
char *hf_config_json(const model_config_t *mc, const char *torch_dtype, int bos, int eos, int pad);
/* generation_config.json (a new string). */
char *hf_generation_config_json(int bos, int eos, int pad);

/* Whether mc has MoE layers (then all of them are: hf_model_check). */
int hf_model_is_moe(const model_config_t *mc);

#endif
