/* `fabula prep`: read this rank's share of the inputs, tokenize each novel
 * (genre token, chapter separators), cut windows, tag segments, then agree
 * on offsets, the validation split and the statistics, and write. */
#include "corpus/prep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer/bytetok.h"
#include "corpus/chapters.h"
#include "corpus/input_reader.h"
#include "corpus/prep_shard.h"
#include "corpus/scenes.h"
#include "corpus/segment.h"
#include "tokenizer/tokenizer.h"
#include "corpus/window_stream.h"
#include "rng.h" /* fb_hash2: the split keys */
#include "parallel/comm.h"
#include "parallel/world.h"
#include "util/error.h"

/* A long chapter is encoded in pieces of about this many bytes, cut at line
 * starts, so that no novel is ever held as one token array. */
#define PREP_PIECE_BYTES (1 << 20)
/* Seconds between progress lines. */
#define PREP_PROGRESS_SECONDS 5.0
/* Mixed into the split seed so that the split and a sampler given the same
 * seed are unrelated. */
#define PREP_SPLIT_SALT 0x73706c6974ULL /* "split" */

typedef struct prep_ctx {
    const prep_options_t *opt;
    tokenizer_t *tok;
    prep_shard_t shard;
    prep_stats_t st;
    window_stream_t ws;
    chapter_finder_t *cf;
    int32_t chapter_sep;
    int32_t genre_token[BYTETOK_NGENRES];
    int cur_genre;            /* of the novel being windowed */
    int32_t cur_novel;        /* its local index */
    token_vec_t piece;        /* ids of one piece of text */
    int32_t *text_ids;        /* a window's ids without specials, for its segment */
    size_t *heads;            /* chapter headings of the novel (byte offsets) */
    size_t heads_cap;
    size_t *breaks;           /* its scene breaks (--split scenes) */
    size_t breaks_cap;
    size_t *cuts;             /* where its samples end (--split chapters, scenes) */
    size_t cuts_cap;
} prep_ctx_t;

int64_t prep_length_bin_upper(int b, int m)
{
    /* The largest len in [1, m] with ((len - 1) * BINS) / m == b. */
    int64_t hi = ((int64_t)(b + 1) * m - 1) / PREP_LENGTH_BINS + 1;
    return hi < m ? hi : m;
}

static const char *const UNIT_NAMES[PREP_NUNITS] = {"windows", "chapters", "scenes"};

const char *prep_unit_name(prep_unit_t u)
{
    FB_ASSERT((int)u >= 0 && (int)u < PREP_NUNITS);
    return UNIT_NAMES[u];
}

int prep_unit_parse(const char *s)
{
    for (int u = 0; u < PREP_NUNITS; u++)
        if (!strcmp(s, UNIT_NAMES[u]))
            return u;
    return -1;
}

/* ------------------------------------------------------------ windows */

static void *grow(void *p, int64_t *cap, int64_t need, size_t elsize)
{
    if (need <= *cap)
        return p;
    int64_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    *cap = c;
    return fb_realloc(p, (size_t)c * elsize);
}

/* A kept window: appended to this rank's block with its metadata. */
static void window_emit(void *vctx, const int32_t *tokens, int64_t len)
{
    prep_ctx_t *c = vctx;
    prep_shard_t *s = &c->shard;
    s->tokens = grow(s->tokens, &s->cap_tokens, s->ntokens + len, sizeof *s->tokens);
    for (int64_t i = 0; i < len; i++)
        s->tokens[s->ntokens + i] = (uint32_t)tokens[i];

    int64_t cap = s->cap;
    if (s->n + 2 > cap) {
        s->offset = grow(s->offset, &cap, s->n + 2, sizeof *s->offset);
        cap = s->cap;
        s->genre = grow(s->genre, &cap, s->n + 2, sizeof *s->genre);
        cap = s->cap;
        s->segment = grow(s->segment, &cap, s->n + 2, sizeof *s->segment);
        cap = s->cap;
        s->split = grow(s->split, &cap, s->n + 2, sizeof *s->split);
        cap = s->cap;
        s->novel = grow(s->novel, &cap, s->n + 2, sizeof *s->novel);
        s->cap = cap;
    }

    /* The segment is measured on the text of the window: its tokens without
     * the genre token and the chapter separators. */
    size_t m = 0;
    for (int64_t i = 1; i < len; i++)
        if (tokens[i] != c->chapter_sep)
            c->text_ids[m++] = tokens[i];
    size_t nbytes = 0;
    uint8_t *text = tokenizer_decode(c->tok, c->text_ids, m, &nbytes);
    int seg = segment_classify(text, nbytes);
    free(text);

    s->offset[s->n] = s->ntokens;
    s->genre[s->n] = (uint8_t)c->cur_genre;
    s->segment[s->n] = (uint8_t)seg;
    s->split[s->n] = 0;
    s->novel[s->n] = c->cur_novel;
    s->n++;
    s->ntokens += len;
    s->offset[s->n] = s->ntokens;

    prep_stats_t *st = &c->st;
    st->samples++;
    st->tokens += len;
    st->genre_samples[c->cur_genre]++;
    st->genre_tokens[c->cur_genre] += len;
    st->segment_samples[seg]++;
    st->segment_tokens[seg] += len;
    st->length_hist[((len - 1) * PREP_LENGTH_BINS) / c->opt->max_seq_len]++;
}

/* ------------------------------------------------------------ novels */

static int starts_blank(const uint8_t *s, size_t n)
{
    if (s[0] == ' ' || s[0] == '\t' || s[0] == '\r' || s[0] == '\n' || s[0] == '\f' || s[0] == '\v')
        return 1;
    return n >= 3 && s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80;
}

/* Where the piece starting at `pos` ends, at most at `stop`: past
 * PREP_PIECE_BYTES, at the first line start whose first character is not
 * blank (pre-tokenizers split there anyway), else at `stop`. */
static size_t piece_end(const uint8_t *text, size_t pos, size_t stop)
{
    if (stop - pos <= PREP_PIECE_BYTES)
        return stop;
    /* The search goes on past each newline it rejects: restarting at the
     * rejected newline itself would find it again forever. */
    for (size_t from = pos + PREP_PIECE_BYTES - 1; from < stop;) {
        const uint8_t *nl = memchr(text + from, '\n', stop - from);
        if (!nl)
            break;
        size_t q = (size_t)(nl - text) + 1;
        if (q < stop && !starts_blank(text + q, stop - q))
            return q;
        from = q;
    }
    return stop;
}

static void encode_push(prep_ctx_t *c, const uint8_t *text, size_t n, prep_novel_t *nv)
{
    c->piece.n = 0;
    tokenizer_encode(c->tok, text, n, &c->piece);
    window_stream_push(&c->ws, c->piece.ids, c->piece.n);
    nv->content_tokens += (int64_t)c->piece.n;
}

/* Whether the line starting at `at` is one of the sorted offsets[0..n). */
static int listed(const size_t *offsets, size_t n, size_t at)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (offsets[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && offsets[lo] == at;
}

/* Whether text[from..to) (whole lines) holds nothing but blank lines,
 * chapter headings and scene breaks: a piece with no text of its own. */
static int piece_empty(const prep_ctx_t *c, const uint8_t *text, size_t from, size_t to, size_t nh, size_t ns)
{
    for (size_t pos = from; pos < to;) {
        const uint8_t *nl = memchr(text + pos, '\n', to - pos);
        size_t end = nl ? (size_t)(nl - text) : to, b;
        if (chapter_line_trim(text + pos, end - pos, &b) > 0 && !listed(c->heads, nh, pos) &&
            !listed(c->breaks, ns, pos))
            return 0;
        pos = end + 1;
    }
    return 1;
}

/* Where the samples of --split chapters or scenes end: the chapter headings
 * (and with scenes the scene breaks), merged in order, into c->cuts. A cut
 * that would end a piece with no text of its own (leading blank lines, a
 * "BOOK I" heading right before "CHAPTER I", a break right after a
 * heading) is left out: those lines go with the next piece. Returns the
 * number of cuts; none for windows. */
static size_t unit_cuts(prep_ctx_t *c, const uint8_t *text, size_t n, size_t nh)
{
    if (c->opt->unit == PREP_UNIT_WINDOWS)
        return 0;
    size_t ns = c->opt->unit == PREP_UNIT_SCENES ? scene_breaks_find(text, n, &c->breaks, &c->breaks_cap) : 0;
    if (nh + ns > c->cuts_cap) {
        c->cuts_cap = nh + ns;
        c->cuts = fb_realloc(c->cuts, c->cuts_cap * sizeof *c->cuts);
    }
    size_t m = 0, from = 0;
    for (size_t h = 0, b = 0; h < nh || b < ns;) {
        size_t at = b >= ns || (h < nh && c->heads[h] <= c->breaks[b]) ? c->heads[h++] : c->breaks[b++];
        if (at == from || piece_empty(c, text, from, at, nh, ns))
            continue;
        c->cuts[m++] = at;
        from = at;
    }
    return m;
}

static void novel_process(prep_ctx_t *c, const input_record_t *rec)
{
    prep_shard_t *s = &c->shard;
    s->novels = grow(s->novels, &s->cap_novels, s->nnovels + 1, sizeof *s->novels);
    prep_novel_t *nv = &s->novels[s->nnovels];
    *nv = (prep_novel_t){
        .title = fb_strdup(rec->title ? rec->title : ""),
        .language = fb_strdup(rec->language ? rec->language : ""),
        .genre = rec->genre,
        .file = rec->file,
        .line = rec->line,
        .item = rec->item,
        .content_bytes = (int64_t)rec->len,
        .invalid_utf8 = rec->invalid_utf8,
        .first_sample = s->n,
    };
    c->cur_genre = rec->genre;
    c->cur_novel = (int32_t)s->nnovels;
    s->nnovels++;

    const uint8_t *text = rec->content;
    size_t n = rec->len;
    size_t nh = chapter_finder_find(c->cf, text, n, &c->heads, &c->heads_cap);
    size_t ncuts = unit_cuts(c, text, n, nh);
    int64_t emitted = c->ws.n_emitted, dropped = c->ws.n_dropped;
    int64_t pieces = c->ws.n_pieces, windowed = c->ws.n_pieces_windowed;
    const int32_t genre_token = c->genre_token[rec->genre];
    window_stream_begin(&c->ws, genre_token);
    size_t h = 0, k = 0;
    for (size_t pos = 0; pos < n;) {
        if (k < ncuts && c->cuts[k] == pos) {
            /* a chapter or scene ends: its last window is written, and the
             * next piece's windows start afresh */
            window_stream_end(&c->ws);
            window_stream_begin(&c->ws, genre_token);
            k++;
        }
        if (h < nh && c->heads[h] == pos) {
            window_stream_push(&c->ws, &c->chapter_sep, 1);
            nv->content_tokens++;
            h++;
        }
        size_t stop = h < nh ? c->heads[h] : n;
        if (k < ncuts && c->cuts[k] < stop)
            stop = c->cuts[k];
        size_t end = piece_end(text, pos, stop);
        encode_push(c, text + pos, end - pos, nv);
        pos = end;
    }
    window_stream_end(&c->ws);
    nv->chapters = (int64_t)nh;
    nv->num_samples = c->ws.n_emitted - emitted;

    prep_stats_t *st = &c->st;
    st->novels++;
    st->content_bytes += nv->content_bytes;
    st->content_tokens += nv->content_tokens;
    st->genre_novels[rec->genre]++;
    st->chapter_seps += nv->chapters;
    st->dropped_windows += c->ws.n_dropped - dropped;
    st->units += c->ws.n_pieces - pieces;
    st->units_windowed += c->ws.n_pieces_windowed - windowed;
    if (nv->num_samples == 0)
        st->novels_without_samples++;
}

/* ------------------------------------------------------------ setup */

/* Rank 0 looks; every rank learns the verdict, so all can exit cleanly. */
static void output_check(const prep_options_t *opt)
{
    int verdict = 0; /* 1 directory, 2 exists without --force, 3 its directory unusable */
    int err = 0;
    if (parallel_rank() == 0) {
        struct stat st;
        if (stat(opt->output, &st) == 0)
            verdict = S_ISDIR(st.st_mode) ? 1 : !opt->force ? 2 : 0;
        /* Before the corpus is tokenized, not after: the file goes there. */
        char *copy = fb_strdup(opt->output);
        const char *dir = dirname(copy);
        if (verdict == 0 && (stat(dir, &st) != 0 || (!S_ISDIR(st.st_mode) && (errno = ENOTDIR)) ||
                             access(dir, W_OK | X_OK) != 0)) {
            err = errno;
            verdict = 3;
        }
        free(copy);
    }
    comm_bcast(comm_world(), &verdict, sizeof verdict, 0);
    comm_bcast(comm_world(), &err, sizeof err, 0);
    if (verdict == 3) {
        char *copy = fb_strdup(opt->output);
        fb_fatal_all(FB_EXIT_IO, "cannot write --output %s: directory %s: %s", opt->output, dirname(copy),
                     strerror(err));
    }
    if (verdict == 1)
        fb_fatal_all(FB_EXIT_USAGE, "--output %s is a directory; give the path of the .h5 file to write",
                     opt->output);
    if (verdict == 2)
        fb_fatal_all(FB_EXIT_USAGE, "%s exists; give --force to replace it", opt->output);
}

/* The option values prep_run relies on (the CLI checks them too; this is
 * the library's own guard, reported once). */
static void options_check(const prep_options_t *opt)
{
    if (!(opt->valid_fraction >= 0 && opt->valid_fraction < 1))
        fb_fatal_all(FB_EXIT_USAGE, "--valid-fraction must be in [0, 1), got %g", opt->valid_fraction);
    if (opt->max_seq_len < 2)
        fb_fatal_all(FB_EXIT_USAGE, "--max-seq-len must be at least 2 (genre token + 1 token), got %d",
                     opt->max_seq_len);
    if (opt->overlap < 0 || opt->overlap > opt->max_seq_len - 2)
        fb_fatal_all(FB_EXIT_USAGE,
                     "--overlap must be in [0, --max-seq-len - 2] = [0, %d] so that windows advance, got %d",
                     opt->max_seq_len - 2, opt->overlap);
    if (opt->min_seq_len < 0 || opt->min_seq_len > opt->max_seq_len)
        fb_fatal_all(FB_EXIT_USAGE, "--min-seq-len must be in [0, --max-seq-len] = [0, %d], got %d",
                     opt->max_seq_len, opt->min_seq_len);
}

static const char *const SPECIAL_TEXT[4] = {"<|pad|>", "<|bos|>", "<|eos|>", "<|chapter_sep|>"};

static void specials_resolve(prep_ctx_t *c, prep_meta_t *meta)
{
    for (int i = 0; i < 4 + BYTETOK_NGENRES; i++) {
        char name[64];
        if (i < 4)
            snprintf(name, sizeof name, "%s", SPECIAL_TEXT[i]);
        else
            snprintf(name, sizeof name, "<|genre_%s|>", bytetok_genre_name(i - 4));
        int32_t id = tokenizer_special(c->tok, name);
        /* pad/bos/eos are recorded for training; the rest prep needs. */
        if (id < 0 && i >= 3)
            fb_fatal(FB_EXIT_DATA, "tokenizer %s has no special token %s, which prep needs", c->opt->tokenizer, name);
        meta->special[i] = id;
        if (i >= 4)
            c->genre_token[i - 4] = id;
    }
    c->chapter_sep = meta->special[3];
}

typedef struct tok_load {
    prep_ctx_t *c;
    prep_meta_t *meta;
} tok_load_t;

static void tok_load_step(void *arg)
{
    tok_load_t *l = arg;
    l->c->tok = tokenizer_load(l->c->opt->tokenizer);
    l->meta->tok = l->c->tok;
    specials_resolve(l->c, l->meta);
}

/* Rank 0 goes first through the steps that can fail on bad input (the
 * other ranks then read the same file and cannot fail differently). */
static void tok_load(tok_load_t *l)
{
    static char msg[1 << 16];
    const int root = parallel_rank() == 0;
    int code = root ? fb_catch(tok_load_step, l, msg, sizeof msg) : 0;
    parallel_agree_outcome(code, msg);
    if (!root)
        tok_load_step(l);
}

/* ------------------------------------------------------------ split */

static int key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The validation novels: the `nvalid` novels of 0..N-1 with the smallest
 * fb_hash2(seed ^ salt, index), which are distinct (fb_hash2 is a bijection
 * of the index). Returns the largest key still held out, or 0 with none. */
static uint64_t split_threshold(int64_t N, int64_t nvalid, uint64_t seed)
{
    if (nvalid <= 0)
        return 0;
    uint64_t *keys = fb_malloc((size_t)N * sizeof *keys);
    for (int64_t i = 0; i < N; i++)
        keys[i] = fb_hash2(seed ^ PREP_SPLIT_SALT, (uint64_t)i);
    /* Partial selection would do; N is the number of novels, so sort. */
    qsort(keys, (size_t)N, sizeof *keys, key_cmp);
    uint64_t t = keys[nvalid - 1];
    free(keys);
    return t;
}

static int64_t split_count(int64_t N, double fraction)
{
    if (fraction <= 0 || N < 2) {
        if (fraction > 0 && parallel_rank() == 0)
            fb_warn("only %lld novel: no validation split (it would leave nothing to train on)", (long long)N);
        return 0;
    }
    int64_t k = llround(fraction * (double)N);
    if (k < 1)
        k = 1;
    if (k > N - 1)
        k = N - 1;
    return k;
}

/* ------------------------------------------------------------ summary */

static double peak_rss_mb(void)
{
    struct rusage ru;
    CHECK_SYS(getrusage(RUSAGE_SELF, &ru));
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

/* ------------------------------------------------------------ run */

static void progress_maybe(prep_ctx_t *c, const input_reader_t *r, int64_t share, double t0, double *last)
{
    if (c->opt->quiet || parallel_rank() != 0)
        return;
    double now = parallel_wtime();
    if (now - *last < PREP_PROGRESS_SECONDS)
        return;
    *last = now;
    const input_read_counts_t *rc = input_reader_counts(r);
    printf("fabula: prep: rank 0: %.1f of %.1f MB read, %lld novels, %.2f M tokens/s\n",
           (double)rc->bytes_read / 1e6, (double)share / 1e6, c->st.novels,
           (double)c->st.content_tokens / 1e6 / (now - t0));
    fflush(stdout);
}

int prep_run(const prep_options_t *opt)
{
    const int rank = parallel_rank(), nranks = parallel_size();
    double t0 = parallel_wtime();
    /* what the process held before prep (shared libraries: the CUDA ones
     * alone are some 200 MB), so that prep's own growth can be reported */
    const double rss_start = peak_rss_mb();
    options_check(opt);
    output_check(opt);

    /* Every rank lists the inputs alike, and fails alike (reported once). */
    corpus_inputs_t in;
    corpus_inputs_list(&in, opt->inputs, opt->ninputs);
    /* Rank 0 goes first through the steps that can fail on bad input, so
     * that a broken tokenizer is reported once. */
    prep_ctx_t c = {.opt = opt};
    prep_meta_t meta = {.opt = opt, .inputs = &in};
    tok_load_t load = {&c, &meta};
    tok_load(&load);
    static const char *const names[3] = {"--max-seq-len", "--overlap", "--min-seq-len"};
    window_stream_init(&c.ws, opt->max_seq_len, opt->overlap, opt->min_seq_len, window_emit, &c, names);
    c.cf = chapter_finder_new();
    c.text_ids = fb_malloc((size_t)opt->max_seq_len * sizeof *c.text_ids);
    c.shard.offset = fb_malloc(sizeof *c.shard.offset);
    c.shard.offset[0] = 0;

    /* ---- read, tokenize, window this rank's share */
    int64_t begin, end;
    corpus_inputs_share(&in, rank, nranks, &begin, &end);
    int64_t share = (end < in.total ? end : in.total) - begin;
    input_reader_t *reader = input_reader_open(&in, begin, end, opt->strict);
    input_record_t rec;
    double last = t0;
    while (input_reader_next(reader, &rec)) {
        novel_process(&c, &rec);
        progress_maybe(&c, reader, share, t0, &last);
    }
    c.st.read = *input_reader_counts(reader);
    double t_read = parallel_wtime() - t0;

    /* ---- line numbers, messages, --strict */
    long long *lines = fb_calloc((size_t)in.n + 1, sizeof *lines);
    for (int f = 0; f < in.n; f++)
        lines[f] = input_reader_lines(reader)[f];
    comm_exscan_sum(comm_world(), lines, (size_t)in.n, COMM_I64);
    int64_t *line_base = fb_malloc(((size_t)in.n + 1) * sizeof *line_base);
    for (int f = 0; f < in.n; f++)
        line_base[f] = lines[f];
    input_reader_report(reader, line_base);
    long long failed = input_reader_failed(reader);
    comm_allreduce(comm_world(), &failed, 1, COMM_I64, COMM_SUM);
    if (failed)
        fb_fatal_all(FB_EXIT_DATA, "malformed input with --strict (see the error%s above); nothing written",
                     failed == 1 ? "" : "s");

    /* ---- where this rank's block goes, and the totals */
    prep_shard_t *s = &c.shard;
    long long base[3] = {s->ntokens, s->n, s->nnovels};
    long long total[5] = {s->ntokens, s->n, s->nnovels, c.st.read.malformed, c.st.read.no_content};
    comm_exscan_sum(comm_world(), base, 3, COMM_I64);
    comm_allreduce(comm_world(), total, 5, COMM_I64, COMM_SUM);
    s->token_base = base[0];
    s->sample_base = base[1];
    s->novel_base = base[2];
    s->total_tokens = total[0];
    s->total_samples = total[1];
    s->total_novels = total[2];
    if (s->total_novels == 0)
        fb_fatal_all(FB_EXIT_DATA,
                     "no usable novel in the input (%lld malformed record%s, %lld without usable \"content\"); each "
                     "record must be a JSON object with a non-empty \"content\" string",
                     total[3], total[3] == 1 ? "" : "s", total[4]);
    if (s->total_samples == 0)
        fb_fatal_all(FB_EXIT_DATA, "no sample: all %lld novels are shorter than --min-seq-len (%d tokens)",
                     total[2], opt->min_seq_len);
    for (int64_t i = 0; i < s->n; i++)
        s->novel[i] += (int32_t)s->novel_base;
    for (int64_t j = 0; j < s->nnovels; j++) {
        prep_novel_t *nv = &s->novels[j];
        nv->first_sample += s->sample_base;
        nv->line = nv->item > 0 ? nv->item : line_base[nv->file] + nv->line + 1;
    }

    /* ---- validation split: whole novels */
    int64_t nvalid = split_count(s->total_novels, opt->valid_fraction);
    meta.valid_novels_requested = nvalid;
    uint64_t threshold = split_threshold(s->total_novels, nvalid, opt->seed);
    for (int64_t j = 0; j < s->nnovels; j++) {
        prep_novel_t *nv = &s->novels[j];
        uint64_t key = fb_hash2(opt->seed ^ PREP_SPLIT_SALT, (uint64_t)(s->novel_base + j));
        nv->split = nvalid > 0 && key <= threshold;
        c.st.split_novels[nv->split]++;
        for (int64_t i = nv->first_sample - s->sample_base; i < nv->first_sample - s->sample_base + nv->num_samples;
             i++) {
            s->split[i] = nv->split;
            c.st.split_samples[nv->split]++;
            c.st.split_tokens[nv->split] += s->offset[i + 1] - s->offset[i];
        }
    }
    prep_stats_t st = c.st;
    comm_allreduce(comm_world(), &st, sizeof st / sizeof(long long), COMM_I64, COMM_SUM);
    if (rank == 0 && nvalid > 0 && st.split_samples[1] == 0)
        fb_warn("the %lld validation novel%s gave no sample (shorter than --min-seq-len)", (long long)nvalid,
                nvalid == 1 ? "" : "s");

    /* ---- write */
    int64_t file_bytes = 0;
    double t_write = prep_shard_write(s, &st, &meta, &file_bytes);
    double rss[2] = {peak_rss_mb(), 0.0};
    rss[1] = rss[0] - rss_start;
    comm_allreduce(comm_world(), rss, 2, COMM_F64, COMM_MAX);
    double t_read_max = t_read;
    comm_allreduce(comm_world(), &t_read_max, 1, COMM_F64, COMM_MAX);
    char *valid_list = prep_valid_list(s, &in);
    if (rank == 0)
        prep_summary_print(&st, &meta, nvalid, valid_list, t_read_max, t_write, file_bytes, parallel_wtime() - t0,
                           rss[0], rss[1]);
    free(valid_list);

    /* ---- free */
    for (int64_t j = 0; j < s->nnovels; j++) {
        free(s->novels[j].title);
        free(s->novels[j].language);
    }
    free(s->novels);
    free(s->tokens);
    free(s->offset);
    free(s->genre);
    free(s->segment);
    free(s->split);
    free(s->novel);
    free(lines);
    free(line_base);
    free(c.text_ids);
    free(c.heads);
    free(c.breaks);
    free(c.cuts);
    token_vec_free(&c.piece);
    chapter_finder_free(c.cf);
    window_stream_free(&c.ws);
    input_reader_close(reader);
    tokenizer_free(c.tok);
    corpus_inputs_free(&in);
    return FB_EXIT_OK;
}
