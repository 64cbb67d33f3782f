/* infer/infer_model.h: a model for inference from a checkpoint or a
 * Hugging Face directory. */
#include "infer/infer_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt_job_config.h"
#include "ckpt/ckpt_weights.h"
#include "hf/hf_import.h"
#include "infer/plain_model.h"
#include "tokenizer/bytetok.h"
#include "tokenizer/tokenizer_match.h"
#include "util/error.h"

static tokenizer_t *load_tokenizer(const char *spec, const char *what, int vocab_size)
{
    if (strcmp(spec, "bytes") != 0 && access(spec, R_OK) != 0)
        fb_fatal(FB_EXIT_IO, "tokenizer %s (%s): %s; give --tokenizer FILE", spec, what, strerror(errno));
    tokenizer_t *tok = tokenizer_load(spec);
    if (tokenizer_vocab_size(tok) > vocab_size)
        fb_fatal(FB_EXIT_DATA, "tokenizer %s has %d tokens, more than the model's vocab_size %d", spec,
                 tokenizer_vocab_size(tok), vocab_size);
    return tok;
}

/* The model source: a checkpoint's weights alone (ckpt_read_weights), on
 * this one process: no optimizer state, no gradients. */
static void open_checkpoint(infer_model_t *g, const char *ckpt, const char *tokenizer, int max_tokens)
{
    static const char *const sets[] = {"zero_optimization.stage=0", "parallel.expert_parallel_size=1",
                                       "run.backend=cpu"};
    long step = 0;
    ckpt_job_config_read(&g->cfg, ckpt, sets, 3, &step);
    g->have_cfg = 1;
    g->model = plain_model_create(&g->cfg.model, ops_cpu(), max_tokens, NULL);
    ckpt_read_weights(ckpt, g->model);
    if (tokenizer && !*tokenizer)
        return;
    g->tok = load_tokenizer(tokenizer ? tokenizer : g->cfg.data.tokenizer,
                            tokenizer ? "--tokenizer" : "the checkpoint's data.tokenizer", g->cfg.model.vocab_size);
    if (tokenizer)
        tokenizer_check_match(ckpt, g->cfg.data.tokenizer, g->cfg.data.corpus_path, g->tok, tokenizer);
}

/* The other model source: a Hugging Face save_pretrained directory (an
 * export of fabula's, or a Llama/Mixtral from elsewhere) and its
 * tokenizer.json. A tokenizer the file's vocabulary does not cover (the
 * fabula special tokens the HF tokenizer loader appends) widens the model
 * as model.init_from does: the rows past the file's start as the mean of
 * its rows (docs/init-from.md). */
static void open_hf_dir(infer_model_t *g, const char *dir, const char *tokenizer, int max_tokens)
{
    model_config_t mc;
    hf_import_config(dir, &mc);
    if (tokenizer && !*tokenizer) {
        g->model = plain_model_create(&mc, ops_cpu(), max_tokens, NULL);
        hf_import_weights(dir, g->model);
        return;
    }
    char *tok_path = NULL;
    if (!tokenizer) {
        size_t n = strlen(dir) + sizeof "/tokenizer.json";
        tok_path = fb_malloc(n);
        snprintf(tok_path, n, "%s/tokenizer.json", dir);
    }
    const char *spec = tokenizer ? tokenizer : tok_path;
    if (strcmp(spec, "bytes") != 0 && access(spec, R_OK) != 0)
        fb_fatal(FB_EXIT_IO, "tokenizer %s (%s): %s; give --tokenizer FILE", spec,
                 tokenizer ? "--tokenizer" : "the model directory's", strerror(errno));
    g->tok = tokenizer_load(spec);
    if (tokenizer_vocab_size(g->tok) > mc.vocab_size)
        mc.vocab_size = tokenizer_vocab_size(g->tok);
    free(tok_path);
    g->model = plain_model_create(&mc, ops_cpu(), max_tokens, NULL);
    hf_import_weights(dir, g->model);
}

void infer_model_close(infer_model_t *g)
{
    if (g->tok)
        tokenizer_free(g->tok);
    if (g->model)
        model_free(g->model);
    if (g->have_cfg)
        config_free(&g->cfg);
}

void infer_model_open(infer_model_t *im, const char *checkpoint, const char *hf_dir, const char *tokenizer,
                      int max_tokens)
{
    FB_ASSERT(!checkpoint != !hf_dir);
    memset(im, 0, sizeof *im);
    if (checkpoint)
        open_checkpoint(im, checkpoint, tokenizer, max_tokens);
    else
        open_hf_dir(im, hf_dir, tokenizer, max_tokens);
}

/* The genre token of NAME, as prep puts it first in every window. */
static int32_t genre_token(const tokenizer_t *tok, const char *name)
{
    int other = 0;
    const int g = bytetok_genre_id(name, &other);
    char text[64];
    snprintf(text, sizeof text, "<|genre_%s|>", bytetok_genre_name(g));
    const int32_t id = other ? -1 : tokenizer_special(tok, text);
    if (id >= 0)
        return id;
    char names[256] = "";
    for (int i = 0; i < BYTETOK_NGENRES; i++) {
        snprintf(text, sizeof text, "<|genre_%s|>", bytetok_genre_name(i));
        if (tokenizer_special(tok, text) >= 0) {
            strncat(names, names[0] ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, bytetok_genre_name(i), sizeof names - strlen(names) - 1);
        }
    }
    fb_fatal(FB_EXIT_USAGE, "--genre '%s': not a genre of the tokenizer; valid: %s", name, names);
}

void infer_prompt_make(infer_prompt_t *p, const tokenizer_t *tok, const char *genre, const uint8_t *text, size_t len,
                       int stop_at)
{
    memset(p, 0, sizeof *p);
    if (genre)
        token_vec_push(&p->ids, genre_token(tok, genre));
    tokenizer_encode(tok, text ? text : (const uint8_t *)"", len, &p->ids);
    const int32_t eos = tokenizer_special(tok, "<|eos|>"), chap = tokenizer_special(tok, "<|chapter_sep|>");
    if (stop_at > 0 && chap < 0)
        fb_fatal(FB_EXIT_USAGE, "--stop-at chapter: the tokenizer has no <|chapter_sep|> token");
    if (eos >= 0 && stop_at >= 0)
        p->stop[p->nstop++] = eos;
    if (stop_at > 0)
        p->stop[p->nstop++] = chap;
}

void infer_prompt_free(infer_prompt_t *p)
{
    token_vec_free(&p->ids);
}
