/* The corpus reader on a corpus made through the prep code path (prep_run,
 * bytes tokenizer) from novels this test writes. The expected samples are
 * rebuilt here independently: the novels read back with the training data
 * path's novels_load, <|chapter_sep|> put at the heading starts, and the
 * windows cut by a naive loop over the formula of docs/data.md. Checked:
 * sample count, lengths, genres, novels, segments, the tokens of single and
 * of non-contiguous, repeated and reversed id sets, the split (whole novels,
 * the requested count), special ids, and corpus_check_tokenizer against
 * the same and a different tokenizer digest / vocabulary. Runs as one MPI
 * rank (singleton). */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/bytetok.h"
#include "corpus/chapters.h"
#include "corpus/corpus.h"
#include "corpus/novels.h"
#include "corpus/prep.h"
#include "corpus/segment.h"
#include "tokenizer/tokenizer.h"
#include "io/h5tensor.h"
#include "parallel/world.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

#define DIR_ "test_corpus.d"
#define INPUT DIR_ "/novels.jsonl"
#define OUTPUT DIR_ "/corpus.h5"
enum { SEQ = 64, OVERLAP = 8, MIN_LEN = 16 };
static const double VALID_FRACTION = 0.34;

/* ------------------------------------------------------------ input */

static const char *const WORDS[] = {"the", "road", "said", "night", "river", "asked", "quiet", "storm",
                                    "and", "of",   "a",    "lamp",  "cold",  "house", "far",   "old"};

/* Appends a JSON-escaped text of about `bytes` bytes: paragraphs of words,
 * some in quotes, with a chapter heading (after two blank lines) every few
 * paragraphs. */
static void text_append(FILE *f, uint64_t seed, int bytes, int chinese)
{
    int written = 0, para = 0;
    while (written < bytes) {
        if (para % 4 == 0) {
            if (chinese)
                written += fprintf(f, "%s\xE7\xAC\xAC%d\xE5\x9B\x9E\\n", para ? "\\n\\n\\n" : "", para / 4 + 1);
            else
                written += fprintf(f, "%sChapter %d\\n", para ? "\\n\\n\\n" : "", para / 4 + 1);
        }
        int quoted = fb_hash2(seed, (uint64_t)para) % 3 == 0;
        if (quoted)
            written += fprintf(f, chinese ? "\xE4\xBB\x96\xE9\x81\x93\xEF\xBC\x9A\xE3\x80\x8C" : "\\u201c");
        int nw = 5 + (int)(fb_hash2(seed, 1000 + (uint64_t)para) % 20);
        for (int w = 0; w < nw; w++)
            written += fprintf(f, "%s%s", w ? " " : "", WORDS[fb_hash2(seed, (uint64_t)(para * 100 + w)) % 16]);
        if (quoted)
            written += fprintf(f, chinese ? "\xE3\x80\x8D" : "\\u201d");
        written += fprintf(f, ".\\n");
        para++;
    }
}

static void input_write(void)
{
    mkdir(DIR_, 0755);
    FILE *f = fopen(INPUT, "wb");
    if (!f) {
        perror(INPUT);
        exit(1);
    }
    fprintf(f, "{\"title\": \"zero\", \"genre\": \"wuxia\", \"content\": \"");
    text_append(f, 1, 900, 1);
    fprintf(f, "\"}\n");
    /* No genre, invalid UTF-8 bytes (kept). */
    fprintf(f, "{\"title\": \"one\", \"content\": \"\xff\xfe caf\xe9 ");
    text_append(f, 2, 1500, 0);
    fprintf(f, "\"}\n");
    fprintf(f, "{\"title\": \"too short\", \"genre\": \"romance\", \"content\": \"tiny\"}\n");
    fprintf(f, "{\"title\": \"empty\", \"genre\": \"romance\", \"content\": \"\"}\n");
    fprintf(f, "{\"title\": \"three\", \"genre\": \"steampunk\", \"content\": \"");
    text_append(f, 3, 2500, 0);
    fprintf(f, "\"}\n");
    for (int k = 4; k < 8; k++) {
        fprintf(f, "{\"title\": \"n%d\", \"genre\": \"%s\", \"content\": \"", k, k % 2 ? "mystery" : "scifi");
        text_append(f, (uint64_t)k, 300 + 400 * k, k == 5);
        fprintf(f, "\"}\n");
    }
    if (fclose(f) != 0) {
        perror(INPUT);
        exit(1);
    }
}

/* ------------------------------------------------------------ expected */

typedef struct expected {
    int32_t *tokens;
    int64_t *offsets;
    int *genre, *novel, *segment;
    int64_t n, ntok, cap, captok;
} expected_t;

static void expected_add(expected_t *e, const int32_t *t, int64_t len, int genre, int novel)
{
    if (e->n + 2 > e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->offsets = fb_realloc(e->offsets, (size_t)e->cap * sizeof *e->offsets);
        e->genre = fb_realloc(e->genre, (size_t)e->cap * sizeof *e->genre);
        e->novel = fb_realloc(e->novel, (size_t)e->cap * sizeof *e->novel);
        e->segment = fb_realloc(e->segment, (size_t)e->cap * sizeof *e->segment);
    }
    if (e->ntok + len > e->captok) {
        e->captok = 2 * (e->ntok + len);
        e->tokens = fb_realloc(e->tokens, (size_t)e->captok * sizeof *e->tokens);
    }
    memcpy(e->tokens + e->ntok, t, (size_t)len * sizeof *t);
    /* The window's text: its bytes without the genre token and separators. */
    uint8_t *text = fb_malloc((size_t)len);
    size_t m = 0;
    for (int64_t i = 1; i < len; i++)
        if (t[i] < 256)
            text[m++] = (uint8_t)t[i];
    e->segment[e->n] = segment_classify(text, m);
    free(text);
    e->offsets[e->n] = e->ntok;
    e->genre[e->n] = genre;
    e->novel[e->n] = novel;
    e->n++;
    e->ntok += len;
    e->offsets[e->n] = e->ntok;
}

static void expected_build(expected_t *e, int *nnovels)
{
    memset(e, 0, sizeof *e);
    novel_set_t set;
    novels_load(&set, INPUT);
    *nnovels = set.n;
    chapter_finder_t *cf = chapter_finder_new();
    size_t *heads = NULL, cap = 0;
    const int64_t W = SEQ - 1, S = SEQ - 1 - OVERLAP, keep = MIN_LEN > 2 ? MIN_LEN : 2;
    for (int v = 0; v < set.n; v++) {
        const novel_t *nv = &set.novels[v];
        size_t nh = chapter_finder_find(cf, nv->content, nv->len, &heads, &cap);
        int32_t *stream = fb_malloc((nv->len + nh) * sizeof *stream);
        int64_t L = 0;
        size_t h = 0;
        for (size_t i = 0; i < nv->len; i++) {
            if (h < nh && heads[h] == i) {
                stream[L++] = BYTETOK_CHAPTER_SEP;
                h++;
            }
            stream[L++] = nv->content[i];
        }
        int64_t K = L <= W ? 1 : 1 + (L - W + S - 1) / S;
        int32_t win[SEQ];
        for (int64_t k = 0; k < K; k++) {
            int64_t start = k * S, end = start + W < L ? start + W : L;
            win[0] = bytetok_genre_token(nv->genre);
            for (int64_t i = start; i < end; i++)
                win[1 + i - start] = stream[i];
            if (1 + end - start >= keep)
                expected_add(e, win, 1 + end - start, nv->genre, v);
        }
        free(stream);
    }
    free(heads);
    chapter_finder_free(cf);
    novels_free(&set);
}

/* ------------------------------------------------------------ checks */

static void check_split(corpus_t *c, const expected_t *e, int split, int *novel_split)
{
    int64_t n = corpus_num_samples(c);
    int32_t buf[SEQ];
    for (int64_t i = 0; i < n; i++) {
        int64_t fi = corpus_sample_file_index(c, i);
        EXPECT(fi >= 0 && fi < e->n, "split %d sample %lld: file index %lld", split, (long long)i, (long long)fi);
        if (fi < 0 || fi >= e->n)
            continue;
        int32_t len = (int32_t)(e->offsets[fi + 1] - e->offsets[fi]);
        EXPECT(corpus_sample_len(c, i) == len, "sample %lld: len %d, expected %d", (long long)fi,
               corpus_sample_len(c, i), len);
        EXPECT(corpus_sample_genre(c, i) == e->genre[fi], "sample %lld: genre", (long long)fi);
        EXPECT(corpus_sample_novel(c, i) == e->novel[fi], "sample %lld: novel %d, expected %d", (long long)fi,
               corpus_sample_novel(c, i), e->novel[fi]);
        EXPECT(corpus_sample_segment(c, i) == e->segment[fi], "sample %lld: segment %d, expected %d", (long long)fi,
               corpus_sample_segment(c, i), e->segment[fi]);
        if (corpus_sample_len(c, i) == len) {
            corpus_read_samples(c, &i, 1, buf);
            EXPECT(!memcmp(buf, e->tokens + e->offsets[fi], (size_t)len * sizeof *buf), "sample %lld: tokens",
                   (long long)fi);
        }
        int nv = e->novel[fi];
        EXPECT(novel_split[nv] == -1 || novel_split[nv] == split, "novel %d has samples in both splits", nv);
        novel_split[nv] = split;
    }
}

/* Reads `ids` in one call and compares with the expected samples laid end
 * to end in the same order. */
static void check_read_set(corpus_t *c, const expected_t *e, const int64_t *ids, int n, const char *what)
{
    int64_t total = 0;
    for (int k = 0; k < n; k++)
        total += corpus_sample_len(c, ids[k]);
    int32_t *got = fb_malloc((size_t)total * sizeof *got), *want = fb_malloc((size_t)total * sizeof *want);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        int64_t fi = corpus_sample_file_index(c, ids[k]);
        int64_t len = e->offsets[fi + 1] - e->offsets[fi];
        memcpy(want + at, e->tokens + e->offsets[fi], (size_t)len * sizeof *want);
        at += len;
    }
    corpus_read_samples(c, ids, n, got);
    EXPECT(at == total && !memcmp(got, want, (size_t)total * sizeof *got), "%s: %d samples, %lld tokens", what, n,
           (long long)total);
    free(got);
    free(want);
}

static void attr_replace(const char *name, const char *svalue, long long ivalue)
{
    hid_t f = H5Fopen(OUTPUT, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK_H5(f);
    CHECK_H5(H5Adelete(f, name));
    if (svalue)
        h5_write_attr_string(f, name, svalue);
    else
        h5_write_attr_i64(f, name, ivalue);
    CHECK_H5(H5Fclose(f));
}

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    input_write();
    const char *inputs[] = {INPUT};
    prep_options_t opt = {
        .inputs = inputs, .ninputs = 1, .tokenizer = "bytes", .output = OUTPUT, .max_seq_len = SEQ,
        .overlap = OVERLAP, .min_seq_len = MIN_LEN, .valid_fraction = VALID_FRACTION, .seed = 7,
        .force = 1, .quiet = 1,
    };
    EXPECT(prep_run(&opt) == 0, "prep_run");

    expected_t e;
    int nnovels;
    expected_build(&e, &nnovels);
    printf("test_corpus: %d novels, %lld expected samples, %lld tokens\n", nnovels, (long long)e.n, (long long)e.ntok);

    corpus_t *train = corpus_open(OUTPUT, CORPUS_TRAIN), *valid = corpus_open(OUTPUT, CORPUS_VALID);
    EXPECT(corpus_num_samples(train) + corpus_num_samples(valid) == e.n, "train %lld + valid %lld samples, expected %lld",
           (long long)corpus_num_samples(train), (long long)corpus_num_samples(valid), (long long)e.n);
    EXPECT(corpus_num_tokens(train) + corpus_num_tokens(valid) == e.ntok, "tokens");
    int *novel_split = fb_malloc((size_t)nnovels * sizeof *novel_split);
    for (int v = 0; v < nnovels; v++)
        novel_split[v] = -1;
    check_split(train, &e, CORPUS_TRAIN, novel_split);
    check_split(valid, &e, CORPUS_VALID, novel_split);

    /* The split: whole novels, round(fraction * novels) of them, as the
     * file's novel table says. */
    hid_t f = h5_open_read(OUTPUT);
    int *nsplit = fb_malloc((size_t)nnovels * sizeof *nsplit);
    h5_read_i32(f, "/novels/split", nsplit, (size_t)nnovels);
    h5_close(f);
    int held = 0, agree = 1;
    for (int v = 0; v < nnovels; v++) {
        held += nsplit[v] == 1;
        agree &= novel_split[v] == -1 || novel_split[v] == nsplit[v];
    }
    EXPECT(held == (int)llround(VALID_FRACTION * nnovels), "%d novels held out of %d", held, nnovels);
    EXPECT(agree, "sample splits agree with /novels/split");
    EXPECT(corpus_num_samples(valid) > 0 && corpus_num_samples(train) > 0, "both splits have samples");

    /* Sets of ids: non-contiguous, repeated, reversed. */
    int64_t nt = corpus_num_samples(train);
    if (nt >= 6) {
        int64_t ids[] = {5, 0, 5, nt - 1, 2, nt / 2};
        check_read_set(train, &e, ids, 6, "non-contiguous with a repeat");
    }
    int64_t *rev = fb_malloc((size_t)nt * sizeof *rev);
    for (int64_t i = 0; i < nt; i++)
        rev[i] = nt - 1 - i;
    check_read_set(train, &e, rev, (int)nt, "all train samples reversed");
    free(rev);
    EXPECT(corpus_max_sample_len(train) == SEQ, "longest sample %d", corpus_max_sample_len(train));
    EXPECT(corpus_max_seq_len(train) == SEQ, "max_seq_len attribute");

    /* Special tokens and the tokenizer check. */
    EXPECT(corpus_special(train, "<|chapter_sep|>") == BYTETOK_CHAPTER_SEP, "chapter_sep id");
    EXPECT(corpus_special(train, "genre_wuxia") == bytetok_genre_token(GENRE_WUXIA), "genre_wuxia id");
    EXPECT(corpus_special(train, "<|pad|>") == BYTETOK_PAD, "pad id");
    EXPECT(corpus_special(train, "<|no_such_token|>") == -1, "unknown special");
    tokenizer_t *bytes = tokenizer_load("bytes");
    EXPECT(corpus_vocab_size(train) == tokenizer_vocab_size(bytes), "vocab size");
    EXPECT(!strcmp(corpus_tokenizer_digest(train), tokenizer_digest(bytes)), "digest");
    EXPECT(corpus_check_tokenizer(train, bytes) == 1, "same tokenizer accepted");
    corpus_close(train);
    corpus_close(valid);

    attr_replace("tokenizer_digest", "0000000000000000000000000000000000000000000000000000000000000000", 0);
    corpus_t *c = corpus_open(OUTPUT, CORPUS_TRAIN);
    EXPECT(corpus_check_tokenizer(c, bytes) == 0, "another digest refused");
    corpus_close(c);
    attr_replace("tokenizer_digest", tokenizer_digest(bytes), 0);
    attr_replace("vocab_size", NULL, tokenizer_vocab_size(bytes) + 1);
    c = corpus_open(OUTPUT, CORPUS_TRAIN);
    EXPECT(corpus_check_tokenizer(c, bytes) == 0, "another vocabulary size refused");
    corpus_close(c);
    tokenizer_free(bytes);

    free(novel_split);
    free(nsplit);
    free(e.tokens);
    free(e.offsets);
    free(e.genre);
    free(e.novel);
    free(e.segment);
    printf("test_corpus: %d checks, %d failed\n", checks, failures);
    parallel_finalize();
    return failures ? 1 : 0;
}
