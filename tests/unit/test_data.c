/* The single-rank data path: byte tokenizer, novel loading (good and bad
 * input), windows, sampler and packed batches. Expected values come from the
 * input files this test writes, from naive re-computations written here, or
 * from the rules stated in docs/data.md. Files are written in the current
 * directory (the build tree under `make check`). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader/batch.h"
#include "tokenizer/bytetok.h"
#include "corpus/novels.h"
#include "io/data_path.h"
#include "loader/sampler.h"
#include "corpus/utf8_guard.h"
#include "corpus/windows.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* ------------------------------------------------------------ tokenizer */

static void test_bytetok(void)
{
    static const char *const genres[] = {"fantasy", "romance", "urban", "scifi", "historical",
                                         "wuxia",   "mystery", "other", "unknown"};
    static const char *const specials[] = {"<|pad|>", "<|bos|>", "<|eos|>", "<|chapter_sep|>"};
    const int ng = (int)(sizeof genres / sizeof *genres);
    EXPECT(BYTETOK_VOCAB == 256 + 4 + ng, "vocab %d", BYTETOK_VOCAB);
    EXPECT(BYTETOK_VOCAB == 269, "vocab %d", BYTETOK_VOCAB);
    for (int i = 0; i < 4; i++)
        EXPECT(bytetok_token_name(256 + i) && strcmp(bytetok_token_name(256 + i), specials[i]) == 0, "special %d",
               256 + i);
    for (int g = 0; g < ng; g++) {
        char name[64], upper[64];
        snprintf(name, sizeof name, "<|genre_%s|>", genres[g]);
        int unk = -1;
        EXPECT(bytetok_genre_id(genres[g], &unk) == g && unk == 0, "genre %s", genres[g]);
        EXPECT(bytetok_genre_token(g) == 260 + g, "genre token %d", g);
        EXPECT(strcmp(bytetok_token_name(260 + g), name) == 0, "token name %d: %s", 260 + g,
               bytetok_token_name(260 + g));
        EXPECT(strcmp(bytetok_genre_name(g), genres[g]) == 0, "genre name %d", g);
        size_t k;
        for (k = 0; genres[g][k]; k++)
            upper[k] = (char)(genres[g][k] - 'a' + 'A');
        upper[k] = '\0';
        EXPECT(bytetok_genre_id(upper, NULL) == g, "case-insensitive %s", upper);
    }
    int unk = -1;
    EXPECT(bytetok_genre_id(NULL, &unk) == GENRE_UNKNOWN && unk == 0, "NULL genre");
    EXPECT(bytetok_genre_id("steampunk", &unk) == GENRE_OTHER && unk == 1, "unrecognised genre");
    EXPECT(bytetok_genre_id("", &unk) == GENRE_OTHER && unk == 1, "empty genre string");
    EXPECT(bytetok_token_name(BYTETOK_VOCAB) == NULL && bytetok_token_name(-1) == NULL, "out of range names");

    /* Byte ids: names "<0xNN>", encode is the identity, decode gives the bytes back. */
    uint8_t all[256];
    int32_t ids[256];
    for (int b = 0; b < 256; b++) {
        char name[16];
        snprintf(name, sizeof name, "<0x%02X>", b);
        EXPECT(strcmp(bytetok_token_name(b), name) == 0, "byte name %d", b);
        all[b] = (uint8_t)(255 - b);
    }
    bytetok_encode(all, 256, ids);
    int same = 1;
    for (int b = 0; b < 256; b++)
        same &= ids[b] == 255 - b;
    EXPECT(same, "encode is the byte value");
    char *text;
    size_t n = bytetok_decode(ids, 256, &text);
    EXPECT(n == 256 && memcmp(text, all, 256) == 0 && text[256] == '\0', "decode of all bytes");
    free(text);

    const int32_t mixed[] = {257, 'h', 'i', 259, 0, 300, 260 + GENRE_WUXIA, 258};
    const char expect[] = "<|bos|>hi<|chapter_sep|>\0<|id_300|><|genre_wuxia|><|eos|>";
    n = bytetok_decode(mixed, sizeof mixed / sizeof *mixed, &text);
    EXPECT(n == sizeof expect - 1 && memcmp(text, expect, n) == 0, "decode with specials: %zu bytes", n);
    free(text);
    printf("bytetok: %d ids, specials and %d genres named, encode/decode round trip\n", BYTETOK_VOCAB, ng);
}

/* ------------------------------------------------------------ UTF-8 guard */

/* A textbook decoder, written independently: length from the lead byte,
 * continuation bytes, then the value must use the shortest form, not be a
 * surrogate and not pass U+10FFFF. */
static int naive_utf8_len(const uint8_t *s, size_t n)
{
    int len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0)
        len = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0)
        len = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < (size_t)len)
        return 0;
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return len;
}

static void test_utf8_guard(void)
{
    static const uint8_t tails[] = {0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0x41, 0xC0};
    long disagree = 0, tried = 0;
    for (int b0 = 0; b0 < 256; b0++)
        for (int b1 = 0; b1 < 256; b1++)
            for (size_t t2 = 0; t2 < sizeof tails; t2++)
                for (size_t t3 = 0; t3 < sizeof tails; t3++) {
                    uint8_t s[4] = {(uint8_t)b0, (uint8_t)b1, tails[t2], tails[t3]};
                    for (size_t n = 1; n <= 4; n++) {
                        tried++;
                        disagree += utf8_guard_seqlen(s, n) != naive_utf8_len(s, n);
                    }
                }
    EXPECT(disagree == 0, "%ld of %ld sequences classified differently from the naive decoder", disagree, tried);

    /* Random bytes: wrapping gives valid UTF-8, unwrapping gives the bytes back. */
    long round_trip_bad = 0, invalid_after_wrap = 0;
    for (int trial = 0; trial < 200; trial++) {
        uint8_t in[97];
        for (size_t i = 0; i < sizeof in; i++)
            in[i] = (uint8_t)(fb_hash2(77, (uint64_t)trial * 1000 + i) >> 56);
        uint8_t *w;
        size_t wn;
        long bad = utf8_guard_wrap(in, sizeof in, &w, &wn);
        if (bad <= 0) /* random bytes are almost surely invalid; a collision would be astonishing */
            continue;
        for (size_t i = 0; i < wn;) {
            int k = naive_utf8_len(w + i, wn - i);
            if (!k) {
                invalid_after_wrap++;
                break;
            }
            i += (size_t)k;
        }
        size_t un = utf8_guard_unwrap(w, wn);
        round_trip_bad += un != sizeof in || memcmp(w, in, un) != 0;
        free(w);
    }
    EXPECT(round_trip_bad == 0 && invalid_after_wrap == 0, "%ld round trips wrong, %ld not valid UTF-8",
           round_trip_bad, invalid_after_wrap);

    const uint8_t collide[] = {0xF4, 0x8F, 0xBD, 0x80, 0xFF};
    uint8_t *w;
    size_t wn;
    EXPECT(utf8_guard_wrap(collide, sizeof collide, &w, &wn) == -1 && w == NULL, "collision reported");
    EXPECT(utf8_guard_wrap(collide, 4, &w, &wn) == 0 && w == NULL, "valid text is left alone");
    printf("utf8_guard: %ld sequences agree with a naive decoder; random bytes survive wrap/unwrap\n", tried);
}

/* ------------------------------------------------------------ novels */

typedef struct expect_novel {
    const char *content;
    size_t len;
    int genre;
    const char *title;
} expect_novel_t;

static void expect_novels(const novel_set_t *set, const expect_novel_t *ex, int n, const char *what)
{
    EXPECT(set->n == n, "%s: %d novels, expected %d", what, set->n, n);
    size_t total = 0;
    for (int i = 0; i < n && i < set->n; i++) {
        const novel_t *nv = &set->novels[i];
        EXPECT(nv->len == ex[i].len && memcmp(nv->content, ex[i].content, ex[i].len) == 0, "%s: novel %d content",
               what, i);
        EXPECT(nv->genre == ex[i].genre, "%s: novel %d genre %d, expected %d", what, i, nv->genre, ex[i].genre);
        EXPECT((!nv->title && !ex[i].title) || (nv->title && ex[i].title && strcmp(nv->title, ex[i].title) == 0),
               "%s: novel %d title", what, i);
        total += ex[i].len;
    }
    EXPECT(set->total_bytes == total, "%s: total bytes %zu, expected %zu", what, set->total_bytes, total);
}

static void test_novels_jsonl(void)
{
    /* Line by line; the comment says what each line tests. */
    static const char jsonl[] =
        "{\"content\":\"Hello\",\"genre\":\"fantasy\",\"title\":\"T1\",\"author\":\"x\"}\n" /* 1 ok */
        "   \n"                                                                            /* 2 blank */
        "{not json\n"                                                                      /* 3 malformed */
        "{\"title\":\"no content\"}\n"                                                     /* 4 no content */
        "{\"content\":\"\",\"genre\":\"romance\"}\n"                                       /* 5 empty */
        "{\"content\":\"abc\"}\n"                                                          /* 6 no genre */
        "{\"content\":\"xyz\",\"genre\":\"Steampunk\"}\n"                                  /* 7 other */
        "{\"content\":\"a\xFF\xC3" "b\xE4\xB8\xAD\xED\xA0\x80z\",\"genre\":\"ROMANCE\",\"title\":\"\xFEt\"}\n" /* 8 bytes */
        "{\"content\":5}\n"                                                                /* 9 not a string */
        "[1,2]\n"                                                                          /* 10 not an object */
        "{\"content\":\"nul\\u0000byte\",\"genre\":null,\"extra\":{\"x\":1}}\n"            /* 11 NUL, null genre */
        "{\"content\":\"crlf\",\"genre\":7}\r\n"                                           /* 12 CRLF, bad genre */
        "\n"
        "{\"content\":\"last\",\"genre\":\"scifi\"}";                                      /* 14 no final newline */
    write_file("test_data_a.jsonl", jsonl, sizeof jsonl - 1);
    const expect_novel_t ex[] = {
        {"Hello", 5, GENRE_FANTASY, "T1"},
        {"abc", 3, GENRE_UNKNOWN, NULL},
        {"xyz", 3, GENRE_OTHER, NULL},
        {"a\xFF\xC3" "b\xE4\xB8\xAD\xED\xA0\x80z", 11, GENRE_ROMANCE, "\xFEt"},
        {"nul\0byte", 8, GENRE_UNKNOWN, NULL},
        {"crlf", 4, GENRE_OTHER, NULL},
        {"last", 4, GENRE_SCIFI, NULL},
    };
    novel_set_t set;
    novels_load(&set, "test_data_a.jsonl");
    expect_novels(&set, ex, (int)(sizeof ex / sizeof *ex), "jsonl");
    EXPECT(set.n_malformed == 2, "malformed %ld", set.n_malformed);
    EXPECT(set.n_no_content == 3, "no content %ld", set.n_no_content);
    EXPECT(set.n_other_genre == 2, "other genre %ld", set.n_other_genre);
    novels_free(&set);

    /* A byte-order mark at the start is not part of the first novel. */
    static const char bom[] = "\xEF\xBB\xBF{\"content\":\"bom\"}\n";
    write_file("test_data_bom.jsonl", bom, sizeof bom - 1);
    const expect_novel_t exb[] = {{"bom", 3, GENRE_UNKNOWN, NULL}};
    novels_load(&set, "test_data_bom.jsonl");
    expect_novels(&set, exb, 1, "bom");
    novels_free(&set);

    /* Paths that exist, or are absolute, are used as given. */
    char *r = data_path_resolve("test_data_a.jsonl");
    EXPECT(strcmp(r, "test_data_a.jsonl") == 0, "existing relative path resolved to %s", r);
    free(r);
    r = data_path_resolve("/nonexistent/test_data.jsonl");
    EXPECT(strcmp(r, "/nonexistent/test_data.jsonl") == 0, "missing absolute path resolved to %s", r);
    free(r);
    printf("novels: JSONL with malformed, missing/empty/non-string content, genres, raw bytes, NUL, CRLF, BOM\n");
}

static void test_novels_json(void)
{
    static const char arr[] = "[\n  {\"content\": \"one\", \"genre\": \"wuxia\"},\n  {\"content\": \"two\\u00e9\"},\n"
                              "  7,\n  {\"content\": \"\"},\n  {\"content\": \"thr\xA0" "ee\", \"genre\": \"Mystery\"}\n]\n";
    write_file("test_data_b.json", arr, sizeof arr - 1);
    const expect_novel_t ex[] = {
        {"one", 3, GENRE_WUXIA, NULL},
        {"two\xC3\xA9", 5, GENRE_UNKNOWN, NULL},
        {"thr\xA0" "ee", 6, GENRE_MYSTERY, NULL},
    };
    novel_set_t set;
    novels_load(&set, "test_data_b.json");
    expect_novels(&set, ex, 3, "json array");
    EXPECT(set.n_malformed == 1 && set.n_no_content == 1, "json array: malformed %ld, no content %ld",
           set.n_malformed, set.n_no_content);
    novels_free(&set);

    /* One pretty-printed object spanning lines: a .json document, not JSONL. */
    static const char obj[] = "{\n  \"title\": \"Solo\",\n  \"genre\": \"historical\",\n  \"content\": \"solo\"\n}\n";
    write_file("test_data_c.json", obj, sizeof obj - 1);
    const expect_novel_t exo[] = {{"solo", 4, GENRE_HISTORICAL, "Solo"}};
    novels_load(&set, "test_data_c.json");
    expect_novels(&set, exo, 1, "json object");
    novels_free(&set);
    printf("novels: .json array (with a non-object and an empty item) and single object\n");
}

static void load_in_child(const void *path)
{
    novel_set_t set;
    novels_load(&set, path);
}

static void windows_in_child(const void *arg)
{
    const int *p = arg; /* seq_len, overlap, min_seq_len */
    static uint8_t text[] = "short";
    novel_t nv = {.content = text, .len = 5, .genre = GENRE_OTHER};
    novel_set_t set = {.novels = &nv, .n = 1, .total_bytes = 5};
    sample_set_t s;
    windows_build(&s, &set, p[0], p[1], p[2]);
}

static void sampler_state_in_child(const void *arg)
{
    (void)arg;
    sampler_t s;
    sampler_init(&s, 10, 1);
    sampler_state_set(&s, 0, 11);
}

static void test_bad_input_exits(void)
{
    static const char none[] = "{\"title\":\"a\"}\n{\"content\":\"\"}\nnot json\n\n{\"content\":null}\n";
    static const char broken[] = "[{\"content\": \"a\"},\n {\"content\": \"b\"\n";
    write_file("test_data_none.jsonl", none, sizeof none - 1);
    write_file("test_data_broken.json", broken, sizeof broken - 1);
    remove("test_data_missing.jsonl");
    struct {
        const char *what;
        void (*fn)(const void *);
        const void *arg;
        int code;
    } cases[] = {
        {"missing file", load_in_child, "test_data_missing.jsonl", 4},
        {"a directory (not a regular file)", load_in_child, ".", 3},
        {"zero usable novels", load_in_child, "test_data_none.jsonl", 3},
        {"unparsable .json", load_in_child, "test_data_broken.json", 3},
        {"all windows too short", windows_in_child, (const int[]){16, 2, 8}, 3},
        {"overlap >= seq_len - 1", windows_in_child, (const int[]){16, 15, 1}, 2},
        {"sampler state past the end", sampler_state_in_child, NULL, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int st = testlib_child_exit(cases[i].fn, cases[i].arg, NULL);
        EXPECT(st == cases[i].code, "%s: exit %d, expected %d", cases[i].what, st, cases[i].code);
        printf("bad input: %s -> exit %d\n", cases[i].what, st);
    }
}

/* ------------------------------------------------------------ windows */

/* Checks a sample set against the window rule of docs/data.md by walking
 * each novel's samples: the first starts at byte 0, each next one starts
 * `overlap` bytes before the previous one ended; only the last may be short
 * or reach the end; what is not covered is a dropped tail too short to keep. */
static void check_windows(const sample_set_t *s, const novel_set_t *nov, int seq_len, int overlap, int min_seq_len)
{
    const int64_t keep_min = min_seq_len > 2 ? min_seq_len : 2;
    int64_t i = 0, dropped = 0, bad = 0;
    char *covered = NULL;
    for (int v = 0; v < nov->n; v++) {
        const novel_t *nv = &nov->novels[v];
        int64_t L = (int64_t)nv->len;
        covered = fb_realloc(covered, (size_t)L + 1);
        memset(covered, 0, (size_t)L + 1);
        int64_t start = 0, end = 0, k = 0;
        for (; i < s->n && s->novel[i] == v; i++, k++) {
            int64_t len = sample_set_len(s, i);
            const int32_t *tok = s->tokens + s->offsets[i];
            if (k > 0)
                start = end - overlap;
            bad += len > seq_len || len < keep_min;
            bad += tok[0] != 260 + nv->genre || s->genre[i] != nv->genre;
            bad += end == L && k > 0; /* a window after one that reached the end */
            end = start + len - 1;
            if (end > L) {
                bad++;
                break;
            }
            for (int64_t p = 1; p < len; p++) {
                bad += tok[p] != nv->content[start + p - 1];
                covered[start + p - 1] = 1;
            }
            if (end < L)
                bad += len != seq_len; /* only the last window may be short */
        }
        int64_t first_gap = 0;
        while (first_gap < L && covered[first_gap])
            first_gap++;
        for (int64_t p = first_gap; p < L; p++)
            bad += covered[p]; /* uncovered bytes form one tail */
        if (first_gap < L) {
            /* The dropped window: the genre token plus [end - overlap, L),
             * or the whole novel when no window was kept. */
            int64_t tail_len = 1 + L - (k > 0 ? end - overlap : 0);
            bad += tail_len >= keep_min || tail_len > seq_len;
            dropped++;
        }
    }
    free(covered);
    EXPECT(i == s->n, "samples left over after the last novel: %lld of %lld", (long long)i, (long long)s->n);
    EXPECT(bad == 0, "seq_len %d overlap %d min %d: %lld violations of the window rule", seq_len, overlap,
           min_seq_len, (long long)bad);
    EXPECT(dropped == s->n_dropped, "dropped %lld, reported %lld", (long long)dropped, (long long)s->n_dropped);
    EXPECT(s->offsets[0] == 0 && s->offsets[s->n] == s->ntokens, "offsets span the tokens");
}

static void make_novels(novel_set_t *set, const int64_t *lens, int n, uint64_t seed)
{
    memset(set, 0, sizeof *set);
    set->novels = fb_calloc((size_t)n, sizeof *set->novels);
    for (int v = 0; v < n; v++) {
        novel_t *nv = &set->novels[v];
        nv->len = (size_t)lens[v];
        nv->content = fb_malloc(nv->len + 1);
        for (size_t p = 0; p < nv->len; p++)
            nv->content[p] = (uint8_t)(fb_hash2(seed, (uint64_t)v << 32 | p) >> 56);
        nv->genre = v % BYTETOK_NGENRES;
        set->total_bytes += nv->len;
    }
    set->n = n;
}

static void test_windows(void)
{
    /* Every length up to 48 (all tail sizes for these window sizes, including
     * those exactly at min_seq_len), then a few long ones. */
    enum { NSHORT = 48 };
    int64_t lens[NSHORT + 3];
    for (int i = 0; i < NSHORT; i++)
        lens[i] = i + 1;
    lens[NSHORT] = 1000, lens[NSHORT + 1] = 233, lens[NSHORT + 2] = 7;
    const int nn = NSHORT + 3;
    const int params[][3] = {{16, 4, 6}, {16, 0, 1}, {16, 14, 2}, {16, 3, 16}, {2, 0, 0}, {5, 2, 4}};
    novel_set_t nov;
    make_novels(&nov, lens, nn, 5);
    for (size_t c = 0; c < sizeof params / sizeof *params; c++) {
        sample_set_t s;
        windows_build(&s, &nov, params[c][0], params[c][1], params[c][2]);
        check_windows(&s, &nov, params[c][0], params[c][1], params[c][2]);
        printf("windows: seq_len %d overlap %d min_seq_len %d -> %lld samples, %lld tokens, %lld tails dropped\n",
               params[c][0], params[c][1], params[c][2], (long long)s.n, (long long)s.ntokens,
               (long long)s.n_dropped);
        sample_set_free(&s);
    }
    novels_free(&nov);
}

/* ------------------------------------------------------------ sampler */

static int is_permutation(const int64_t *ids, int64_t n)
{
    char *seen = fb_calloc((size_t)n, 1);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n || seen[ids[i]])
            ok = 0;
        else
            seen[ids[i]] = 1;
    }
    free(seen);
    return ok;
}

static void draw(sampler_t *s, int64_t *out, int64_t total, int chunk)
{
    for (int64_t k = 0; k < total; k += chunk)
        sampler_next(s, (int)(total - k < chunk ? total - k : chunk), out + k);
}

static void test_sampler(void)
{
    enum { N = 37, EPOCHS = 4 };
    int64_t a[N * EPOCHS], b[N * EPOCHS], c[N * EPOCHS];
    sampler_t s;
    sampler_init(&s, N, 1234);
    draw(&s, a, N * EPOCHS, 5); /* 5 does not divide 37: calls straddle epoch ends */
    for (int e = 0; e < EPOCHS; e++)
        EXPECT(is_permutation(a + e * N, N), "epoch %d is a permutation", e);
    EXPECT(s.epoch == EPOCHS - 1 && s.position == N, "state after %d epochs: %lld/%lld", EPOCHS,
           (long long)s.epoch, (long long)s.position);
    EXPECT(memcmp(a, a + N, N * sizeof *a) != 0, "epochs 0 and 1 differ");
    sampler_free(&s);

    /* The documented shuffle, recomputed here from fb_hash2. */
    int ref_ok = 1;
    for (int e = 0; e < EPOCHS; e++) {
        int64_t p[N];
        for (int i = 0; i < N; i++)
            p[i] = i;
        for (int i = N - 1; i > 0; i--) {
            uint64_t j = fb_hash2(1234, ((uint64_t)e << 32) + (uint64_t)i) % (uint64_t)(i + 1);
            int64_t t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        ref_ok &= memcmp(p, a + e * N, sizeof p) == 0;
    }
    EXPECT(ref_ok, "permutations follow the documented Fisher-Yates on fb_hash2");

    sampler_init(&s, N, 1234);
    draw(&s, b, N * EPOCHS, 11);
    EXPECT(memcmp(a, b, sizeof a) == 0, "same seed, other chunking: same sequence");
    sampler_free(&s);
    sampler_init(&s, N, 1235);
    draw(&s, c, N * EPOCHS, 5);
    EXPECT(memcmp(a, c, N * sizeof *a) != 0, "other seed: other order");
    sampler_free(&s);

    /* Resume: a fresh sampler set to the saved state continues identically. */
    sampler_init(&s, N, 1234);
    draw(&s, b, 50, 7);
    int64_t epoch, pos;
    sampler_state_get(&s, &epoch, &pos);
    EXPECT(epoch == 1 && pos == 50 - N, "state after 50 ids: %lld/%lld", (long long)epoch, (long long)pos);
    sampler_t r;
    sampler_init(&r, N, 1234);
    sampler_state_set(&r, epoch, pos);
    int64_t x[60], y[60];
    sampler_next(&s, 60, x);
    sampler_next(&r, 60, y);
    EXPECT(memcmp(x, y, sizeof x) == 0 && memcmp(x, a + 50, sizeof x) == 0, "resumed sampler continues the sequence");
    sampler_free(&s);
    sampler_free(&r);

    sampler_init(&s, 1, 9);
    sampler_next(&s, 3, x);
    EXPECT(x[0] == 0 && x[1] == 0 && x[2] == 0 && s.epoch == 2, "one sample: every epoch is {0}");
    sampler_free(&s);
    printf("sampler: %d epochs of %d are permutations, reproducible, seed-dependent, resumable\n", EPOCHS, N);
}

/* ------------------------------------------------------------ batch */

static void check_batch(const batch_t *b, const sample_set_t *s, const int64_t *ids, int n)
{
    long T = 0, bad = 0;
    for (int i = 0; i < n; i++)
        T += (long)sample_set_len(s, ids[i]);
    EXPECT(b->T == T && b->nseq == n, "T %d (expected %ld), nseq %d (expected %d)", b->T, T, b->nseq, n);
    EXPECT(b->ntargets == T - n, "ntargets %ld, expected %ld", b->ntargets, T - n);
    if (b->T != T || b->nseq != n)
        return;
    long t = 0, counted = 0;
    bad += b->cu_seqlens[0] != 0;
    for (int i = 0; i < n; i++) {
        const int32_t *src = s->tokens + s->offsets[ids[i]];
        long len = (long)sample_set_len(s, ids[i]);
        for (long p = 0; p < len; p++, t++) {
            bad += b->tokens[t] != src[p] || b->positions[t] != p;
            bad += b->targets[t] != (p == len - 1 ? -1 : src[p + 1]);
            counted += b->targets[t] >= 0;
        }
        bad += b->cu_seqlens[i + 1] != t || b->genre[i] != s->genre[ids[i]];
    }
    EXPECT(bad == 0 && counted == b->ntargets, "%ld wrong entries in the packed batch", bad);
}

static void test_batch(void)
{
    const int64_t lens[] = {100, 37, 9, 400};
    novel_set_t nov;
    make_novels(&nov, lens, 4, 11);
    sample_set_t s;
    windows_build(&s, &nov, 32, 8, 4);
    batch_t b = {0};
    const int64_t ids1[] = {3, 0, 0, s.n - 1, 5}; /* a sample may repeat within a batch */
    batch_pack(&b, &s, ids1, 5);
    check_batch(&b, &s, ids1, 5);

    sampler_t sm;
    sampler_init(&sm, s.n, 3);
    int64_t ids2[64];
    sampler_next(&sm, 64, ids2); /* more than the first buffers hold: they must grow */
    batch_pack(&b, &s, ids2, 64);
    check_batch(&b, &s, ids2, 64);
    batch_pack(&b, &s, ids2 + 10, 2);
    check_batch(&b, &s, ids2 + 10, 2);
    batch_pack(&b, &s, NULL, 0);
    EXPECT(b.T == 0 && b.nseq == 0 && b.ntargets == 0 && b.cu_seqlens[0] == 0, "empty batch");
    printf("batch: packed 5, 64, 2 and 0 samples of %lld; tokens, positions, targets, cu_seqlens, genres checked\n",
           (long long)s.n);
    sampler_free(&sm);
    batch_free(&b);
    sample_set_free(&s);
    novels_free(&nov);
}

/* ------------------------------------------------------------ bundled corpus */

/* Samples per novel by walking windows one at a time (no closed form). */
static int64_t naive_window_count(int64_t L, int seq_len, int overlap, int min_seq_len)
{
    int64_t W = seq_len - 1, S = W - overlap, keep_min = min_seq_len > 2 ? min_seq_len : 2, count = 0;
    for (int64_t start = 0;; start += S) {
        int64_t c = start + W < L ? W : L - start;
        count += c + 1 >= keep_min;
        if (start + W >= L)
            return count;
    }
}

static void test_sample_corpus(void)
{
    const char *path = testlib_srcdir_file("inputs/sample.jsonl", "sample corpus");
    if (!path)
        return;
    novel_set_t set;
    novels_load(&set, path);

    /* Independent reading: jansson directly, line by line. */
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "open %s", path);
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int v = 0;
    while ((got = getline(&line, &cap, f)) > 0) {
        json_error_t err;
        json_t *o = json_loadb(line, (size_t)got, 0, &err);
        EXPECT(o != NULL, "%s: %s", path, err.text);
        if (!o)
            continue;
        const json_t *c = json_object_get(o, "content");
        const char *g = json_string_value(json_object_get(o, "genre"));
        if (v < set.n) {
            const novel_t *nv = &set.novels[v];
            EXPECT(nv->len == json_string_length(c) && memcmp(nv->content, json_string_value(c), nv->len) == 0,
                   "sample novel %d content", v);
            EXPECT(strcmp(bytetok_genre_name(nv->genre), g) == 0, "sample novel %d genre %s", v, g);
        }
        v++;
        json_decref(o);
    }
    free(line);
    fclose(f);
    EXPECT(v == set.n && v > 0, "%d lines, %d novels", v, set.n);

    const int cfgs[][3] = {{128, 0, 1}, {128, 32, 64}};
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        sample_set_t s;
        windows_build(&s, &set, cfgs[k][0], cfgs[k][1], cfgs[k][2]);
        int64_t expect = 0;
        for (int i = 0; i < set.n; i++)
            expect += naive_window_count((int64_t)set.novels[i].len, cfgs[k][0], cfgs[k][1], cfgs[k][2]);
        EXPECT(s.n == expect, "%lld samples, naive count %lld", (long long)s.n, (long long)expect);
        check_windows(&s, &set, cfgs[k][0], cfgs[k][1], cfgs[k][2]);
        printf("sample corpus: %d novels, %zu bytes; seq_len %d overlap %d min_seq_len %d -> %lld samples\n", set.n,
               set.total_bytes, cfgs[k][0], cfgs[k][1], cfgs[k][2], (long long)s.n);
        sample_set_free(&s);
    }
    novels_free(&set);
}

int main(void)
{
    test_bytetok();
    test_utf8_guard();
    test_novels_jsonl();
    test_novels_json();
    test_bad_input_exits();
    test_windows();
    test_sampler();
    test_batch();
    test_sample_corpus();
    const char *files[] = {"test_data_a.jsonl", "test_data_bom.jsonl", "test_data_b.json",    "test_data_c.json",
                           "test_data_none.jsonl", "test_data_broken.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        remove(files[i]);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
