/* The pieces of `fabula prep` that need no MPI: chapter headings, the
 * segment heuristic, the streamed window rule and the sharing of the input
 * between ranks. Expected values come from how each input is built here
 * (which lines were written as headings, how many words were put inside
 * quotes), from the independent windows_build of the training data path,
 * or from reading every share and comparing with the whole file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytetok.h"
#include "corpus/chapters.h"
#include "corpus/novels.h"
#include "corpus/input_reader.h"
#include "corpus/segment.h"
#include "corpus/window_stream.h"
#include "corpus/windows.h"
#include "rng.h"
#include "testlib.h"
#include "util/error.h"

/* ------------------------------------------------------------ chapters */

typedef struct text_builder {
    char buf[8192];
    size_t n;
    size_t expect[64]; /* offsets of the lines written as headings */
    size_t nexpect;
} text_builder_t;

/* Appends `blank` empty lines, then `line`; `heading` says whether the
 * rules make it a heading. */
static void tb_line(text_builder_t *tb, int blank, const char *line, int heading)
{
    for (int i = 0; i < blank; i++)
        tb->buf[tb->n++] = '\n';
    if (heading)
        tb->expect[tb->nexpect++] = tb->n;
    size_t len = strlen(line);
    memcpy(tb->buf + tb->n, line, len);
    tb->n += len;
    tb->buf[tb->n++] = '\n';
}

static void test_chapters(void)
{
    chapter_finder_t *cf = chapter_finder_new();
    text_builder_t tb = {.n = 0};
    tb_line(&tb, 0, "\xE7\xAC\xAC\xE4\xB8\x80\xE5\x9B\x9E\xE3\x80\x80\xE7\x94\x84\xE5\xA3\xAB", 1); /* 第一回　甄士: first line */
    tb_line(&tb, 0, "Some opening text of the novel, quite ordinary.", 0);
    tb_line(&tb, 2, "Chapter 1", 1);
    tb_line(&tb, 1, "Chapter 2", 0); /* one blank line only */
    tb_line(&tb, 2, "CHAPTER IV.", 1);
    tb_line(&tb, 3, "Chapter the First", 1);
    tb_line(&tb, 2, "BOOK II", 1);
    tb_line(&tb, 2, "Book the First--Recalled to Life", 1);
    tb_line(&tb, 2, "Part Twenty-One", 1);
    tb_line(&tb, 2, "II. THE RED-HEADED LEAGUE", 1);
    tb_line(&tb, 2, "XII.", 1);
    tb_line(&tb, 2, "\xE7\xAC\xAC\xE5\x8D\x81\xE4\xBA\x8C\xE7\xAB\xA0", 1);                    /* 第十二章 */
    tb_line(&tb, 2, "\xE7\xAC\xAC\xE4\xB8\x80\xE2\x97\x8B\xE2\x97\x8B\xE5\x9B\x9E", 1);        /* 第一○○回 */
    tb_line(&tb, 2, "\xE7\xAC\xAC" "3" "\xE5\x8D\xB7", 1);                                      /* 第3卷 */
    tb_line(&tb, 2, "\xE3\x80\x80\xE3\x80\x80\xE7\xAC\xAC\xE4\xBA\x8C\xE5\x9B\x9E", 1);        /* 　　第二回 */
    tb_line(&tb, 2, "  Chapter 7  \r", 1);
    tb_line(&tb, 2, "\xE7\xAC\xAC\xE4\xB8\x80\xE6\xAC\xA1\xE8\xA6\x8B\xE9\x9D\xA2", 0);        /* 第一次見面 */
    tb_line(&tb, 2, "Chapterhouse Dune", 0);
    tb_line(&tb, 2, "Chapter Ivan", 0);
    tb_line(&tb, 2, "I.e. not a heading", 0);
    tb_line(&tb, 2, "ii. lower case numerals", 0);
    tb_line(&tb, 2, "Part of the plan was simple.", 0);
    tb_line(&tb, 2, "chapter \xff\xfe 3", 0); /* invalid UTF-8 */
    char longline[300];
    memset(longline, 'x', sizeof longline);
    memcpy(longline, "Chapter 9 ", 10);
    longline[sizeof longline - 1] = '\0';
    tb_line(&tb, 2, longline, 0); /* over 200 bytes */
    tb_line(&tb, 0, "Chapter 10", 0);  /* right after a text line */
    tb_line(&tb, 2, "chapter twelve", 1);

    size_t *starts = NULL, cap = 0;
    size_t n = chapter_finder_find(cf, (const uint8_t *)tb.buf, tb.n, &starts, &cap);
    EXPECT(n == tb.nexpect, "found %zu headings, wrote %zu", n, tb.nexpect);
    for (size_t i = 0; i < n && i < tb.nexpect; i++)
        EXPECT(starts[i] == tb.expect[i], "heading %zu at %zu, written at %zu ('%.20s')", i, starts[i], tb.expect[i],
               tb.buf + tb.expect[i]);

    /* Leading blank lines: the first non-blank line still counts as the
     * start; CRLF line ends behave like LF. */
    const char *crlf = "\r\n\r\nCHAPTER I.\r\ntext\r\n\r\n\r\nCHAPTER II.\r\n";
    n = chapter_finder_find(cf, (const uint8_t *)crlf, strlen(crlf), &starts, &cap);
    EXPECT(n == 2 && starts[0] == 4 && starts[1] == (size_t)(strstr(crlf, "CHAPTER II.") - crlf),
           "CRLF: %zu headings", n);
    n = chapter_finder_find(cf, (const uint8_t *)"", 0, &starts, &cap);
    EXPECT(n == 0, "empty text: %zu", n);
    free(starts);
    chapter_finder_free(cf);
}

/* ------------------------------------------------------------ segments */

/* Text of `q` quoted and `u` unquoted words, and `v` dialogue verbs among
 * the unquoted ones. */
static size_t make_english(char *buf, int q, int u, int v)
{
    size_t n = 0;
    n += (size_t)sprintf(buf + n, "\xE2\x80\x9C"); /* “ */
    for (int i = 0; i < q; i++)
        n += (size_t)sprintf(buf + n, "%sword", i ? " " : "");
    n += (size_t)sprintf(buf + n, "\xE2\x80\x9D"); /* ” */
    for (int i = 0; i < u; i++)
        n += (size_t)sprintf(buf + n, " %s", i < v ? "said" : "tree");
    n += (size_t)sprintf(buf + n, ".\n");
    return n;
}

static void test_segments(void)
{
    static char buf[1 << 16];
    static const struct {
        int q, u, v;
    } cases[] = {{60, 40, 1}, {50, 50, 0}, {30, 70, 2}, {20, 80, 0}, {10, 90, 3},
                 {4, 96, 0},  {0, 100, 0}, {0, 2000, 1}, {0, 999, 1}, {4, 996, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int q = cases[k].q, u = cases[k].u, v = cases[k].v;
        size_t n = make_english(buf, q, u, v);
        segment_measure_t m;
        segment_measure((const uint8_t *)buf, n, &m);
        EXPECT(m.units == q + u && m.quoted == q && m.verbs == v, "case %zu: units %ld quoted %ld verbs %ld", k,
               m.units, m.quoted, m.verbs);
        /* The thresholds of segment.h, in doubles. */
        double qs = (double)q / (q + u), vr = 1000.0 * v / (q + u);
        int expect = qs >= 0.5 ? SEGMENT_DIALOGUE
                     : qs >= 0.2 ? SEGMENT_MIXED
                     : qs < 0.05 && vr < 1.0 ? SEGMENT_DESCRIPTION
                     : SEGMENT_NARRATIVE;
        int got = segment_classify((const uint8_t *)buf, n);
        EXPECT(got == expect, "case %zu (q %d u %d v %d): %s, expected %s", k, q, u, v, segment_name(got),
               segment_name(expect));
    }
    /* 他笑道：「你好。」 : 5 units (CJK), 2 quoted, 1 verb. */
    const char *zh = "\xE4\xBB\x96\xE7\xAC\x91\xE9\x81\x93\xEF\xBC\x9A\xE3\x80\x8C\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82"
                     "\xE3\x80\x8D";
    segment_measure_t m;
    segment_measure((const uint8_t *)zh, strlen(zh), &m);
    EXPECT(m.units == 5 && m.quoted == 2 && m.verbs == 1, "zh: units %ld quoted %ld verbs %ld", m.units, m.quoted,
           m.verbs);
    /* A window that starts inside a quotation: 好的。」他說 -> 好的 quoted. */
    const char *mid = "\xE5\xA5\xBD\xE7\x9A\x84\xE3\x80\x82\xE3\x80\x8D\xE4\xBB\x96\xE8\xAA\xAA";
    segment_measure((const uint8_t *)mid, strlen(mid), &m);
    EXPECT(m.units == 4 && m.quoted == 2 && m.verbs == 0, "mid-quote: units %ld quoted %ld verbs %ld", m.units,
           m.quoted, m.verbs);
    /* Straight quotes toggle; the state resets at a line end. */
    const char *st = "\"one two three\nfour five";
    segment_measure((const uint8_t *)st, strlen(st), &m);
    EXPECT(m.units == 5 && m.quoted == 3, "straight: units %ld quoted %ld", m.units, m.quoted);
    EXPECT(segment_classify((const uint8_t *)"", 0) == SEGMENT_DESCRIPTION, "empty text");
    EXPECT(segment_classify((const uint8_t *)"\xff\xfe\x80", 3) == SEGMENT_DESCRIPTION, "invalid UTF-8 only");
    EXPECT(!strcmp(segment_name(SEGMENT_MIXED), "mixed") && segment_name(SEGMENT_NTYPES) == NULL, "names");
}

/* ------------------------------------------------------------ windows */

typedef struct collect {
    int32_t *tokens;
    int64_t *offsets;
    int64_t n, ntok;
} collect_t;

static void collect_emit(void *ctx, const int32_t *t, int64_t len)
{
    collect_t *c = ctx;
    c->tokens = realloc(c->tokens, (size_t)(c->ntok + len) * sizeof *c->tokens);
    c->offsets = realloc(c->offsets, (size_t)(c->n + 2) * sizeof *c->offsets);
    memcpy(c->tokens + c->ntok, t, (size_t)len * sizeof *t);
    c->offsets[c->n] = c->ntok;
    c->ntok += len;
    c->n++;
    c->offsets[c->n] = c->ntok;
}

/* The streamed rule against windows_build (src/corpus/windows.c), with the
 * novels pushed in random pieces. */
static void test_window_stream(void)
{
    static const int params[][3] = {{8, 2, 0}, {8, 0, 1}, {16, 14, 4}, {5, 3, 5}, {64, 8, 16}, {2, 0, 0}, {33, 7, 33}};
    for (size_t p = 0; p < sizeof params / sizeof *params; p++) {
        novel_set_t set = {0};
        set.n = 12;
        set.novels = calloc((size_t)set.n, sizeof *set.novels);
        for (int v = 0; v < set.n; v++) {
            size_t len = 1 + fb_hash2(p * 100 + (uint64_t)v, 1) % 300;
            set.novels[v].len = len;
            set.novels[v].content = malloc(len);
            for (size_t i = 0; i < len; i++)
                set.novels[v].content[i] = (uint8_t)fb_hash2((uint64_t)v, i);
            set.novels[v].genre = v % BYTETOK_NGENRES;
        }
        sample_set_t ref;
        windows_build(&ref, &set, params[p][0], params[p][1], params[p][2]);

        collect_t got = {0};
        window_stream_t ws;
        static const char *const names[3] = {"a", "b", "c"};
        window_stream_init(&ws, params[p][0], params[p][1], params[p][2], collect_emit, &got, names);
        for (int v = 0; v < set.n; v++) {
            window_stream_begin(&ws, bytetok_genre_token(set.novels[v].genre));
            int32_t *ids = malloc(set.novels[v].len * sizeof *ids);
            bytetok_encode(set.novels[v].content, set.novels[v].len, ids);
            for (size_t at = 0; at < set.novels[v].len;) {
                size_t piece = 1 + fb_hash2(7, at + (size_t)v * 1000) % 40;
                if (piece > set.novels[v].len - at)
                    piece = set.novels[v].len - at;
                window_stream_push(&ws, ids + at, piece);
                at += piece;
            }
            window_stream_end(&ws);
            free(ids);
        }
        EXPECT(got.n == ref.n && got.ntok == ref.ntokens, "params %zu: %lld windows / %lld tokens, reference %lld / %lld",
               p, (long long)got.n, (long long)got.ntok, (long long)ref.n, (long long)ref.ntokens);
        if (got.n == ref.n && got.ntok == ref.ntokens) {
            EXPECT(!memcmp(got.offsets, ref.offsets, (size_t)(ref.n + 1) * sizeof *ref.offsets), "params %zu: offsets",
                   p);
            EXPECT(!memcmp(got.tokens, ref.tokens, (size_t)ref.ntokens * sizeof *ref.tokens), "params %zu: tokens", p);
        }
        EXPECT(ws.n_dropped == ref.n_dropped, "params %zu: dropped %lld, reference %lld", p, (long long)ws.n_dropped,
               (long long)ref.n_dropped);
        window_stream_free(&ws);
        sample_set_free(&ref);
        novels_free(&set);
        free(got.tokens);
        free(got.offsets);
    }
}

/* ------------------------------------------------------------ sharing */

static void write_file(const char *path, const char *data)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(data, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* Reads the inputs as `nranks` shares, rank by rank, and checks that the
 * records come out once each, in file order, with their true line numbers. */
static void shares_check(const corpus_inputs_t *in, int nranks, const char *const *titles, const int64_t *lines,
                         int nrec)
{
    int next = 0;
    int64_t *base = calloc((size_t)in->n, sizeof *base);
    for (int r = 0; r < nranks; r++) {
        int64_t b, e;
        corpus_inputs_share(in, r, nranks, &b, &e);
        input_reader_t *rd = input_reader_open(in, b, e, 0);
        input_record_t rec;
        while (input_reader_next(rd, &rec)) {
            int ok = next < nrec && rec.title && !strcmp(rec.title, titles[next]);
            int64_t line = rec.line >= 0 ? base[rec.file] + rec.line + 1 : rec.item;
            EXPECT(ok && line == lines[next], "%d ranks, rank %d: record '%s' line %lld, expected '%s' line %lld",
                   nranks, r, rec.title ? rec.title : "(none)", (long long)line, next < nrec ? titles[next] : "-",
                   next < nrec ? (long long)lines[next] : -1LL);
            next++;
        }
        for (int f = 0; f < in->n; f++)
            base[f] += input_reader_lines(rd)[f];
        input_reader_close(rd);
    }
    EXPECT(next == nrec, "%d ranks: %d records, expected %d", nranks, next, nrec);
    free(base);
}

static void test_sharing(void)
{
    /* Shares partition [0, T] in order. */
    corpus_inputs_t fake = {.total = 1000003};
    for (int P = 1; P <= 9; P++) {
        int64_t prev = 0, b, e;
        for (int r = 0; r < P; r++) {
            corpus_inputs_share(&fake, r, P, &b, &e);
            EXPECT(b == prev && e >= b, "P %d rank %d: [%lld, %lld)", P, r, (long long)b, (long long)e);
            prev = e;
        }
        EXPECT(prev == fake.total + 1, "P %d: shares end at %lld", P, (long long)prev);
    }

    /* A JSONL file with blank lines and one bad record, and a .json array. */
    write_file("test_prep_parts_a.jsonl",
               "{\"title\": \"a1\", \"content\": \"first\"}\n"
               "\n"
               "{\"title\": \"a2\", \"content\": \"second novel, longer than the first\"}\n"
               "not json at all\n"
               "{\"title\": \"a3\", \"content\": \"x\", \"genre\": \"wuxia\"}\n"
               "{\"title\": \"a4\", \"content\": \"the last line has no newline\"}");
    write_file("test_prep_parts_b.json",
               "[{\"title\": \"b1\", \"content\": \"one\"}, {\"title\": \"b2\", \"content\": \"two\"}]");
    static const char *const titles[] = {"a1", "a2", "a3", "a4", "b1", "b2"};
    static const int64_t lines[] = {1, 3, 5, 6, 1, 2};
    char *args[] = {"test_prep_parts_a.jsonl", "test_prep_parts_b.json"};
    corpus_inputs_t in;
    corpus_inputs_list(&in, (const char *const *)args, 2);
    EXPECT(in.n == 2 && in.files[1].is_document && !in.files[0].is_document, "listing");
    for (int P = 1; P <= 12; P++)
        shares_check(&in, P, titles, lines, 6);
    corpus_inputs_free(&in);
}

int main(void)
{
    test_chapters();
    test_segments();
    test_window_stream();
    test_sharing();
    printf("test_prep_parts: %d checks, %d failed (chapter rules, segment heuristic, streamed windows vs "
           "windows_build, input shares on 1..12 ranks)\n",
           checks, failures);
    return failures ? 1 : 0;
}
