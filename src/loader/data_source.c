#include "loader/data_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/data_path.h"
#include "loader/data_check.h"
#include "loader/eval_order.h"
#include "tokenizer/bytetok.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

/* Whether every id in [from, to) is one of fabula's specials the tokenizer
 * appended (a model imported with model.init_from lacks their rows; the
 * import adds them). */
static int appended_only(const tokenizer_t *tok, int from, int to)
{
    int covered = 0;
    for (int i = 0; i < tokenizer_nspecial(tok); i++) {
        int32_t id;
        const char *text = tokenizer_special_at(tok, i, &id);
        if (id >= from && id < to && !strncmp(text, "<|", 2) &&
            (!strcmp(text, "<|pad|>") || !strcmp(text, "<|bos|>") || !strcmp(text, "<|eos|>") ||
             !strcmp(text, "<|chapter_sep|>") || !strncmp(text, "<|genre_", 8)))
            covered++;
    }
    return covered == to - from;
}

static void open_corpus(data_source_t *s, const config_t *cfg, int verbose, int split)
{
    s->corpus = corpus_open_hints(cfg->data.corpus_path, split, &cfg->prep.mpi_info);
    tokenizer_t *tok = tokenizer_load(cfg->data.tokenizer);
    if (!corpus_check_tokenizer(s->corpus, tok))
        fb_fatal_all(FB_EXIT_DATA, "%s was made with another tokenizer than data.tokenizer = %s (digest %s); "
                 "give the tokenizer prep used", cfg->data.corpus_path, cfg->data.tokenizer, tokenizer_digest(tok));
    const int need = corpus_vocab_size(s->corpus);
    if (cfg->init_from && need > cfg->model.vocab_size && appended_only(tok, cfg->model.vocab_size, need))
        s->vocab_grow = need;
    tokenizer_free(tok);
    if (need > cfg->model.vocab_size && !s->vocab_grow)
        fb_fatal_all(FB_EXIT_USAGE, "model.vocab_size = %d is smaller than the vocabulary of %s (%d)",
                 cfg->model.vocab_size, cfg->data.corpus_path, corpus_vocab_size(s->corpus));
    s->n = corpus_num_samples(s->corpus);
    s->lens = fb_malloc((size_t)(s->n ? s->n : 1) * sizeof *s->lens);
    s->genres = fb_malloc((size_t)(s->n ? s->n : 1) * sizeof *s->genres);
    int64_t cut = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t len = corpus_sample_len(s->corpus, i);
        if (len > cfg->data.seq_len) {
            len = cfg->data.seq_len;
            cut++;
        }
        s->lens[i] = len;
        s->genres[i] = (uint8_t)corpus_sample_genre(s->corpus, i);
        s->tokens += len;
    }
    if (cut && verbose)
        fb_warn("%s: %lld samples are longer than data.seq_len = %d and are cut to it (prep used "
                "--max-seq-len %d)", cfg->data.corpus_path, (long long)cut, cfg->data.seq_len,
                corpus_max_seq_len(s->corpus));
    s->what = cfg->data.corpus_path;
}

static void open_text(data_source_t *s, const config_t *cfg)
{
    const data_config_t *d = &cfg->data;
    novels_load(&s->novels, d->train_path);
    windows_build(&s->samples, &s->novels, d->seq_len, d->overlap, d->min_seq_len);
    s->n = s->samples.n;
    s->lens = fb_malloc((size_t)(s->n ? s->n : 1) * sizeof *s->lens);
    s->genres = s->samples.genre;
    for (int64_t i = 0; i < s->n; i++) {
        s->lens[i] = sample_set_len(&s->samples, i);
        s->tokens += s->lens[i];
    }
    s->what = d->train_path;
}

void data_source_open(data_source_t *s, const config_t *cfg, int verbose)
{
    memset(s, 0, sizeof *s);
    if (cfg->data.corpus_path && cfg->data.corpus_path[0])
        open_corpus(s, cfg, verbose, CORPUS_TRAIN);
    else
        open_text(s, cfg);
    if (s->n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no training sample (for text input: none of at least data.min_seq_len = %d "
                 "tokens)", s->what, cfg->data.min_seq_len);
    if (!verbose)
        return;
    printf("fabula: data: %s: %lld samples of <= %d tokens (%lld tokens), %s%s\n", s->what, (long long)s->n,
           cfg->data.seq_len, (long long)s->tokens, s->corpus ? "sample unit " : "windows, byte tokenizer",
           s->corpus ? corpus_sample_unit(s->corpus) : "");
    fflush(stdout);
    data_check_corpus_t dc = {
        .what = s->what,
        .unit = s->corpus ? corpus_sample_unit(s->corpus) : "windows",
        .prepared = s->corpus != NULL,
        .max_seq_len = s->corpus ? corpus_max_seq_len(s->corpus) : cfg->data.seq_len,
        .lens = s->lens,
        .n = s->n,
    };
    char msg[2048];
    if (data_check_batch(cfg, &dc, msg, sizeof msg))
        fb_warn("%s", msg);
    if (data_check_seq_len(cfg, &dc, msg, sizeof msg))
        fb_warn("%s", msg);
    if (data_check_curriculum(cfg, &dc, msg, sizeof msg))
        fb_warn("%s", msg);
    if (data_check_packing(cfg, &dc, msg, sizeof msg))
        fb_warn("%s", msg);
}

/* The novel of each sample (the source's own numbering). */
static int32_t *sample_novels(const data_source_t *s)
{
    int32_t *novel = fb_malloc((size_t)(s->n ? s->n : 1) * sizeof *novel);
    for (int64_t i = 0; i < s->n; i++)
        novel[i] = s->corpus ? corpus_sample_novel(s->corpus, i) : s->samples.novel[i];
    return novel;
}

const int64_t *data_source_eval_order(data_source_t *s)
{
    if (!s->eval_order) {
        int32_t *novel = sample_novels(s);
        s->eval_order = fb_malloc((size_t)(s->n ? s->n : 1) * sizeof *s->eval_order);
        eval_order_make(novel, s->genres, s->n, s->eval_order);
        free(novel);
    }
    return s->eval_order;
}

void data_source_eval_coverage(data_source_t *s, int64_t count, int64_t *novels, int *genres)
{
    const int64_t *order = data_source_eval_order(s);
    int32_t *novel = sample_novels(s);
    eval_order_coverage(novel, s->genres, order, count < s->n ? count : s->n, novels, genres);
    free(novel);
}

/* "TITLE (genre), ..." of the split's novels, the first few by name. */
static void valid_titles(data_source_t *s, char *out, size_t len)
{
    enum { SHOWN = 8 };
    size_t at = 0;
    int64_t listed = 0, more = 0;
    out[0] = 0;
    for (int64_t i = 0; i < s->n; i++) {
        int32_t v = corpus_sample_novel(s->corpus, i);
        if (i > 0 && v == corpus_sample_novel(s->corpus, i - 1))
            continue;
        if (listed == SHOWN) {
            more++;
            continue;
        }
        char title[128];
        corpus_novel_title(s->corpus, v, title, sizeof title);
        int k = snprintf(out + at, len - at, "%s%s (%s)", listed ? ", " : "", title[0] ? title : "untitled",
                         bytetok_genre_name(s->genres[i]));
        if (k < 0 || (size_t)k >= len - at)
            break;
        at += (size_t)k;
        listed++;
    }
    if (more)
        snprintf(out + at, len - at, " and %lld more", (long long)more);
}

void data_source_open_valid(data_source_t *s, const config_t *cfg, int verbose, const char *who)
{
    memset(s, 0, sizeof *s);
    if (!cfg->data.corpus_path || !cfg->data.corpus_path[0])
        fb_fatal_all(FB_EXIT_USAGE, "%s needs a validation split: give data.corpus, made by "
                     "`fabula prep --valid-fraction F`", who);
    open_corpus(s, cfg, 0, CORPUS_VALID);
    if (s->n == 0)
        fb_fatal_all(FB_EXIT_USAGE, "%s: %s has no validation sample (make it with `fabula prep "
                     "--valid-fraction F`)", who, cfg->data.corpus_path);
    s->what = "validation split";
    if (!verbose)
        return;
    const int64_t take = cfg->run.eval_samples < s->n ? cfg->run.eval_samples : s->n;
    int64_t novels, all_novels;
    int genres, all_genres;
    data_source_eval_coverage(s, take, &novels, &genres);
    data_source_eval_coverage(s, s->n, &all_novels, &all_genres);
    char titles[1536];
    valid_titles(s, titles, sizeof titles);
    printf("fabula: data: %s of %s: %lld novel%s held out by prep (%s), %lld samples (%lld tokens); every %ld "
           "steps the same %lld samples are evaluated, spread over %lld of the %lld novels and %d of the %d genres\n",
           s->what, cfg->data.corpus_path, (long long)all_novels, all_novels == 1 ? "" : "s", titles,
           (long long)s->n, (long long)s->tokens, cfg->run.eval_interval, (long long)take, (long long)novels,
           (long long)all_novels, genres, all_genres);
    fflush(stdout);
    if (novels < all_novels)
        fb_warn("run.eval_samples = %ld covers %lld of the %lld validation novels (one sample of each novel in turn): "
                "give run.eval_samples >= %lld to evaluate on every held-out novel",
                cfg->run.eval_samples, (long long)novels, (long long)all_novels, (long long)all_novels);
}

void data_source_close(data_source_t *s)
{
    if (s->corpus) {
        corpus_close(s->corpus);
        free(s->genres);
    } else {
        sample_set_free(&s->samples);
        novels_free(&s->novels);
    }
    free(s->lens);
    free(s->buf);
    free(s->genre_buf);
    free(s->eval_order);
    memset(s, 0, sizeof *s);
}

void data_source_batch(data_source_t *s, batch_t *b, const int64_t *ids, const int64_t *lens, int n)
{
    size_t need = 0;
    for (int i = 0; i < n; i++)
        need += (size_t)(s->corpus ? corpus_sample_len(s->corpus, ids[i]) : sample_set_len(&s->samples, ids[i]));
    if (need > s->buf_cap || !s->buf) {
        s->buf_cap = need > 1024 ? need : 1024;
        s->buf = fb_realloc(s->buf, s->buf_cap * sizeof *s->buf);
    }
    s->genre_buf = fb_realloc(s->genre_buf, (size_t)(n ? n : 1));
    int64_t *full = fb_malloc((size_t)(n ? n : 1) * sizeof *full);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        s->genre_buf[i] = s->genres[ids[i]];
        if (s->corpus) {
            full[i] = corpus_sample_len(s->corpus, ids[i]);
        } else {
            full[i] = sample_set_len(&s->samples, ids[i]);
            memcpy(s->buf + at, s->samples.tokens + s->samples.offsets[ids[i]], (size_t)full[i] * sizeof *s->buf);
        }
        at += (size_t)full[i];
    }
    if (s->corpus && n > 0)
        corpus_read_samples(s->corpus, ids, n, s->buf);
    /* each sample cut to its planned (capped) length */
    int max_len = 0;
    for (int i = 0; i < n; i++)
        if (lens[i] > max_len)
            max_len = (int)lens[i];
    batch_from_tokens(b, s->buf, full, s->genre_buf, n, max_len);
    free(full);
}
