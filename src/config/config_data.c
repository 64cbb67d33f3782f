/* "data" (corpus, tokenizer, windows) and "run" (steps, seed, directory). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/config_internal.h"
#include "util/error.h"

void config_read_run(cj_ctx_t *c, config_t *cfg)
{
    run_config_t *r = &cfg->run;
    cj_section(c, "run");
    /* first, so that each unknown key is reported as it should be */
    c->strict = cj_bool(c, "run.strict_config", 0);
    for (size_t i = 0; i < c->duplicates->n; i++)
        cj_error(c, "%s", c->duplicates->items[i]);
    r->steps = (long)cj_integer(c, "run.steps", cj_default_integer(c, "run.steps"));
    if (r->steps <= 0) {
        cj_invalid(c, "run.steps", "a positive integer (optimizer steps to run)");
        r->steps = cj_default_integer(c, "run.steps"); /* one bad value, one error */
    }
    long long seed = cj_integer(c, "run.seed", cj_default_integer(c, "run.seed"));
    if (seed < 0)
        cj_invalid(c, "run.seed", "an integer >= 0");
    r->seed = (uint64_t)seed;
    const char *dir = cj_string(c, "run.run_dir", cj_default_string(c, "run.run_dir"));
    if (!*dir)
        cj_invalid(c, "run.run_dir", "a non-empty directory path");
    r->run_dir = fb_strdup(dir);
    const char *backend = cj_string(c, "run.backend", cj_default_string(c, "run.backend"));
    if (!strcmp(backend, "cpu"))
        r->backend = RUN_BACKEND_CPU;
    else if (!strcmp(backend, "cuda"))
        r->backend = RUN_BACKEND_CUDA;
    else if (!strcmp(backend, "auto"))
        r->backend = RUN_BACKEND_AUTO;
    else if (!strcmp(backend, "cpu16"))
        r->backend = RUN_BACKEND_CPU16;
    else
        cj_invalid(c, "run.backend",
                   "\"cpu\", \"cuda\", \"auto\" (cuda when a GPU is visible) or \"cpu16\" (CPU, 16-bit storage)");
    r->eval_interval = (long)cj_integer(c, "run.eval_interval", cj_default_integer(c, "run.eval_interval"));
    if (r->eval_interval < 0)
        cj_invalid(c, "run.eval_interval", "an integer >= 0 (steps between validation losses; 0 = none)");
    r->eval_samples = (long)cj_integer(c, "run.eval_samples", cj_default_integer(c, "run.eval_samples"));
    if (r->eval_samples < 1)
        cj_invalid(c, "run.eval_samples", "a positive integer (validation samples per evaluation)");
    config_read_preempt(c, cfg);
    /* DeepSpeed's key, top level. */
    r->steps_per_print = cj_int(c, "steps_per_print", 10);
    if (r->steps_per_print <= 0)
        cj_invalid(c, "steps_per_print", "a positive integer");
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* data.train_path, the name an old page of docs/data.md gave data.train:
 * refused with the key to use (as an unknown key it only warned, and the
 * run trained on the bundled sample). */
static void refuse_train_path(cj_ctx_t *c)
{
    static const char key[] = "data.train_path";
    json_t *v = cj_lookup(c, c->root, key);
    if (!v)
        return;
    cj_strs_push(&c->known, key);
    const char *path = json_is_string(v) ? json_string_value(v) : "";
    if (ends_with(path, ".h5") || ends_with(path, ".hdf5"))
        cj_error(c, "config key '%s' is not fabula's: a corpus file made by `fabula prep` is data.corpus "
                    "(\"data\": {\"corpus\": \"%.200s\"})", key, path);
    else
        cj_error(c, "config key '%s' is not fabula's: novels as .jsonl/.json text (byte tokenizer) are data.train, "
                    "a corpus file made by `fabula prep` is data.corpus", key);
}

/* data.train, data.overlap and data.min_seq_len shape the windows of text
 * input; a corpus from prep has its own (its --overlap, --min-seq-len).
 * Only values other than the default's are noted: a checkpoint's saved
 * config, which `fabula eval` and the other tools load as the user's,
 * holds every key. */
static void note_text_keys(cj_ctx_t *c, const data_config_t *d)
{
    if (!d->corpus_path[0])
        return;
    static const char *const keys[] = {"data.train", "data.overlap", "data.min_seq_len"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (cj_given(c, c->user, keys[i]) &&
            !json_equal(cj_lookup(c, c->user, keys[i]), cj_lookup(c, c->defaults, keys[i]))) {
            char item[160];
            snprintf(item, sizeof item, "%s (data.corpus is given: its samples are prep's)", keys[i]);
            cj_strs_push(&c->inert, item);
        }
}

void config_read_data(cj_ctx_t *c, config_t *cfg)
{
    data_config_t *d = &cfg->data;
    const model_config_t *m = &cfg->model;
    cj_section(c, "data");
    refuse_train_path(c);
    const char *train = cj_string(c, "data.train", cj_default_string(c, "data.train"));
    if (!*train)
        cj_invalid(c, "data.train", "a non-empty path of the training corpus");
    d->train_path = fb_strdup(train);
    /* a corpus made by `fabula prep` takes precedence over data.train */
    d->corpus_path = fb_strdup(cj_string(c, "data.corpus", cj_default_string(c, "data.corpus")));
    const char *tok = cj_string(c, "data.tokenizer", cj_default_string(c, "data.tokenizer"));
    if (!*tok)
        cj_invalid(c, "data.tokenizer", "\"bytes\" or a tokenizer file");
    d->tokenizer = fb_strdup(tok);
    d->seq_len = cj_int(c, "data.seq_len", (int)cj_default_integer(c, "data.seq_len"));
    d->overlap = cj_int(c, "data.overlap", (int)cj_default_integer(c, "data.overlap"));
    d->min_seq_len = cj_int(c, "data.min_seq_len", (int)cj_default_integer(c, "data.min_seq_len"));
    if (d->seq_len < 2) {
        cj_invalid(c, "data.seq_len", "an integer >= 2 (a window needs an input and a target token)");
        d->seq_len = (int)cj_default_integer(c, "data.seq_len"); /* one bad value, one error */
    }
    /* a window shares at most all its content tokens but one with the next,
     * so that windows advance (windows.h) */
    if (d->overlap < 0 || d->overlap > d->seq_len - 2)
        cj_invalid(c, "data.overlap", "an integer in [0, data.seq_len - 2 = %d]", d->seq_len - 2);
    if (d->min_seq_len < 2 || d->min_seq_len > d->seq_len)
        cj_invalid(c, "data.min_seq_len", "an integer in [2, data.seq_len = %d]", d->seq_len);
    if (d->seq_len > m->max_position_embeddings)
        cj_invalid(c, "data.seq_len", "at most model.max_position_embeddings (%d)", m->max_position_embeddings);
    note_text_keys(c, d);
    if (strcmp(d->tokenizer, "bytes") == 0 && m->vocab_size < FB_BYTES_VOCAB_MIN)
        cj_invalid(c, "model.vocab_size",
                   "at least %d with data.tokenizer \"bytes\" (256 bytes + pad, bos, eos, <|chapter_sep|> "
                   "and 9 genre tokens)",
                   FB_BYTES_VOCAB_MIN);
}
