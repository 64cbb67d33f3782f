/* A whole model and its tokenizer for inference, opened from either of
 * its sources: a fabula checkpoint or a Hugging Face save_pretrained
 * directory (`fabula generate`, `fabula eval --model ... --logits-out`).
 * Everything after infer_model_open sees a model_t and a tokenizer only. */
#ifndef FABULA_INFER_INFER_MODEL_H
#define FABULA_INFER_INFER_MODEL_H

#include "config/config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct infer_model {
    model_t *model;
    tokenizer_t *tok;   /* NULL when opened with INFER_NO_TOKENIZER */
    config_t cfg;       /* a checkpoint's config */
    int have_cfg;
} infer_model_t;

/* The `tokenizer` that opens the weights alone. */
#define INFER_NO_TOKENIZER ""

/* One of checkpoint (a checkpoint file: its weights alone, read through
 * ckpt_read_weights as `fabula eval` reads them, on this one process, CPU
 * backend) and hf_dir (its config.json and safetensors), into a
 * forward-only model (plain_model_create). tokenizer: NULL for the source's own (the
 * checkpoint's data.tokenizer, DIR/tokenizer.json), a file or "bytes"
 * given instead (checked against the one a checkpoint was trained with),
 * or INFER_NO_TOKENIZER. A tokenizer with more tokens than a directory's
 * vocabulary widens the model as model.init_from does. max_tokens: the
 * longest forward of model_forward (the decoder keeps its own cache).
 * Fatal on a source that cannot be read (exit 3 or 4). */
void infer_model_open(infer_model_t *im, const char *checkpoint, const char *hf_dir, const char *tokenizer,
                      int max_tokens);
void infer_model_close(infer_model_t *im);

/* A prompt as generate takes it: its ids and the ids that end a sample. */
typedef struct infer_prompt {
    token_vec_t ids;
    int32_t stop[2];
    int nstop;
} infer_prompt_t;

/* The genre token of `genre` first when given (as prep starts every
 * window; fatal, exit 2, on a genre the tokenizer lacks), then text[0..len)
 * encoded; stop_at 0: a sample stops at <|eos|>, 1: at <|eos|> or
 * <|chapter_sep|> (fatal, exit 2, when the tokenizer has no such token),
 * -1: only at its length. */
void infer_prompt_make(infer_prompt_t *p, const tokenizer_t *tok, const char *genre, const uint8_t *text, size_t len,
                       int stop_at);
void infer_prompt_free(infer_prompt_t *p);

#endif
