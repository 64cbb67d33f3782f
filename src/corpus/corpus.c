/* The corpus reader: the per-sample arrays of one split in memory, the
 * tokens read on demand by hyperslab. */
#include "corpus/corpus.h"

#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus/prep.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "parallel/comm.h"
#include "parallel/mpi_io.h"
#include "util/error.h"

struct corpus {
    char *path;
    hid_t file, tokens, dxpl;
    int split;
    int64_t n;          /* samples of the split */
    int64_t *index;     /* their indices among all samples */
    int64_t *start;     /* first token in /tokens */
    int32_t *len;
    uint8_t *genre, *segment;
    int32_t *novel;
    int64_t ntokens;
    int32_t max_len;
    int vocab_size, max_seq_len;
    char *digest, *kind;
    char *unit;         /* the sample_unit attribute; "windows" when absent (older files) */
    /* /novels/title, read on first use (messages only): ntitles strings of
     * title_width bytes, null-padded; none when the file has no titles */
    int titles_loaded;
    char *titles;
    size_t ntitles, title_width;
};

/* ------------------------------------------------------------ open */

static hid_t file_open_mpio(const char *path, const mpi_hints_t *hints)
{
    /* H5Fopen opens by name: a FIFO there would block it for good */
    char why[1024];
    int code = regular_file_check(path, why, sizeof why);
    if (code == FB_EXIT_IO || (!code && access(path, R_OK) != 0))
        fb_fatal(FB_EXIT_IO, "cannot open corpus %s: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_H5(fapl);
    parallel_h5_fapl_mpio(fapl, comm_world(), hints);
    /* The file is readable, so a failure is about its content: say so
     * instead of printing HDF5's stack. */
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    CHECK_H5(H5Pclose(fapl));
    if (f < 0)
        fb_fatal(FB_EXIT_DATA, "cannot open corpus %s: not an HDF5 file, or damaged", path);
    return f;
}

static int attr_exists(const corpus_t *c, const char *name)
{
    htri_t e = H5Aexists(c->file, name);
    if (e < 0)
        fb_fatal(FB_EXIT_DATA, "%s: the root group's attributes cannot be read (damaged file)", c->path);
    return e > 0;
}

static long long attr_i64_required(const corpus_t *c, const char *name)
{
    if (!attr_exists(c, name))
        fb_fatal(FB_EXIT_DATA, "%s: corpus attribute \"%s\" is missing", c->path, name);
    return h5_read_attr_i64(c->file, name);
}

/* A positive size that fits an int (as a 64-bit attribute it could wrap). */
static int attr_int_required(const corpus_t *c, const char *name)
{
    long long v = attr_i64_required(c, name);
    if (v < 1 || v > INT32_MAX)
        fb_fatal(FB_EXIT_DATA, "%s: corpus attribute \"%s\" is %lld, not a size in 1..%d", c->path, name, v,
                 INT32_MAX);
    return (int)v;
}

static char *attr_string_required(const corpus_t *c, const char *name)
{
    if (!attr_exists(c, name))
        fb_fatal(FB_EXIT_DATA, "%s: corpus attribute \"%s\" is missing", c->path, name);
    return h5_read_attr_string(c->file, name);
}

static void format_check(const corpus_t *c)
{
    if (!attr_exists(c, "format"))
        fb_fatal(FB_EXIT_DATA, "%s: not a fabula corpus (no \"format\" attribute; make one with `fabula prep`)",
                 c->path);
    char *format = h5_read_attr_string(c->file, "format");
    if (strcmp(format, CORPUS_FORMAT_NAME) != 0)
        fb_fatal(FB_EXIT_DATA, "%s: not a fabula corpus (format \"%s\", expected \"%s\")", c->path, format,
                 CORPUS_FORMAT_NAME);
    free(format);
    long long version = attr_i64_required(c, "version");
    if (version > CORPUS_FORMAT_VERSION || version < 1)
        fb_fatal(FB_EXIT_DATA, "%s: corpus format version %lld; this fabula reads versions 1..%d (newer fabula "
                 "needed, or make the corpus again with this one)",
                 c->path, version, CORPUS_FORMAT_VERSION);
}

/* Its element count, backed by bytes the file stores: the per-sample
 * arrays are allocated from these counts, and a sample of /tokens is read
 * whole. */
static size_t dataset_required(const corpus_t *c, const char *name)
{
    if (!h5_exists(c->file, name))
        fb_fatal(FB_EXIT_DATA, "%s: corpus dataset %s is missing (not a complete fabula corpus)", c->path, name);
    return h5_dataset_numel_stored(c->file, name);
}

/* The per-sample arrays, kept for the samples of the split. */
static void samples_load(corpus_t *c)
{
    size_t n = dataset_required(c, "/samples/offset");
    if (n < 1)
        fb_fatal(FB_EXIT_DATA, "%s: /samples/offset is empty", c->path);
    n -= 1;
    static const char *const names[4] = {"/samples/genre", "/samples/segment", "/samples/split", "/samples/novel"};
    for (int k = 0; k < 4; k++)
        if (dataset_required(c, names[k]) != n)
            fb_fatal(FB_EXIT_DATA, "%s: %s has %zu entries, /samples/offset says %zu samples", c->path, names[k],
                     dataset_required(c, names[k]), n);
    size_t ntok = dataset_required(c, "/tokens");
    if (n > ntok) /* every sample has a token */
        fb_fatal(FB_EXIT_DATA, "%s: /samples/offset says %zu samples, /tokens has %zu entries", c->path, n, ntok);

    long long *off = fb_malloc((n + 1) * sizeof *off);
    int *genre = fb_malloc((n ? n : 1) * sizeof *genre), *segment = fb_malloc((n ? n : 1) * sizeof *segment);
    int *split = fb_malloc((n ? n : 1) * sizeof *split), *novel = fb_malloc((n ? n : 1) * sizeof *novel);
    h5_read_i64(c->file, "/samples/offset", off, n + 1);
    h5_read_i32(c->file, "/samples/genre", genre, n);
    h5_read_i32(c->file, "/samples/segment", segment, n);
    h5_read_i32(c->file, "/samples/split", split, n);
    h5_read_i32(c->file, "/samples/novel", novel, n);
    if (off[0] != 0 || off[n] != (long long)ntok)
        fb_fatal(FB_EXIT_DATA, "%s: /samples/offset runs from %lld to %lld, /tokens has %zu entries", c->path,
                 off[0], off[n], ntok);

    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (off[i + 1] <= off[i] || off[i + 1] - off[i] > INT32_MAX)
            fb_fatal(FB_EXIT_DATA, "%s: /samples/offset is not increasing at sample %zu", c->path, i);
        if (off[i + 1] - off[i] > c->max_seq_len)
            fb_fatal(FB_EXIT_DATA, "%s: sample %zu has %lld tokens, more than the corpus's max_seq_len = %d",
                     c->path, i, off[i + 1] - off[i], c->max_seq_len);
        m += split[i] == c->split;
    }
    c->n = (int64_t)m;
    c->index = fb_malloc((m ? m : 1) * sizeof *c->index);
    c->start = fb_malloc((m ? m : 1) * sizeof *c->start);
    c->len = fb_malloc((m ? m : 1) * sizeof *c->len);
    c->genre = fb_malloc(m ? m : 1);
    c->segment = fb_malloc(m ? m : 1);
    c->novel = fb_malloc((m ? m : 1) * sizeof *c->novel);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (split[i] != c->split)
            continue;
        c->index[k] = (int64_t)i;
        c->start[k] = off[i];
        c->len[k] = (int32_t)(off[i + 1] - off[i]);
        c->genre[k] = (uint8_t)genre[i];
        c->segment[k] = (uint8_t)segment[i];
        c->novel[k] = novel[i];
        c->ntokens += c->len[k];
        if (c->len[k] > c->max_len)
            c->max_len = c->len[k];
        k++;
    }
    free(off);
    free(genre);
    free(segment);
    free(split);
    free(novel);
}

corpus_t *corpus_open(const char *path, int split) { return corpus_open_hints(path, split, NULL); }

corpus_t *corpus_open_hints(const char *path, int split, const mpi_hints_t *hints)
{
    FB_ASSERT(split == CORPUS_TRAIN || split == CORPUS_VALID);
    corpus_t *c = fb_calloc(1, sizeof *c);
    c->path = fb_strdup(path);
    c->split = split;
    c->file = file_open_mpio(path, hints);
    /* the file is readable: a failure from here on is damage, reported
     * as such (exit 3) without HDF5's error stack */
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    format_check(c);
    c->vocab_size = attr_int_required(c, "vocab_size");
    c->max_seq_len = attr_int_required(c, "max_seq_len");
    c->digest = attr_string_required(c, "tokenizer_digest");
    c->kind = attr_string_required(c, "tokenizer_kind");
    c->unit = attr_exists(c, "sample_unit") ? h5_read_attr_string(c->file, "sample_unit") : fb_strdup("windows");
    if (prep_unit_parse(c->unit) < 0)
        fb_fatal(FB_EXIT_DATA, "%s: corpus attribute \"sample_unit\" is \"%.40s\", not windows, chapters or scenes",
                 c->path, c->unit);
    samples_load(c);
    c->tokens = H5Dopen2(c->file, "/tokens", H5P_DEFAULT);
    if (c->tokens < 0)
        fb_fatal(FB_EXIT_DATA, "%s: /tokens cannot be opened (damaged file)", c->path);
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    c->dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK_H5(c->dxpl);
    parallel_h5_dxpl_independent(c->dxpl);
    return c;
}

void corpus_close(corpus_t *c)
{
    if (!c)
        return;
    CHECK_H5(H5Pclose(c->dxpl));
    CHECK_H5(H5Dclose(c->tokens));
    CHECK_H5(H5Fclose(c->file));
    free(c->path);
    free(c->index);
    free(c->start);
    free(c->len);
    free(c->genre);
    free(c->segment);
    free(c->novel);
    free(c->digest);
    free(c->kind);
    free(c->unit);
    free(c->titles);
    free(c);
}

/* ------------------------------------------------------------ samples */

int64_t corpus_num_samples(const corpus_t *c) { return c->n; }
int64_t corpus_num_tokens(const corpus_t *c) { return c->ntokens; }
int32_t corpus_max_sample_len(const corpus_t *c) { return c->max_len; }

static void id_check(const corpus_t *c, int64_t i)
{
    if (i < 0 || i >= c->n)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "corpus sample id", "out of range for the split");
}

int32_t corpus_sample_len(const corpus_t *c, int64_t i)
{
    id_check(c, i);
    return c->len[i];
}

int corpus_sample_genre(const corpus_t *c, int64_t i)
{
    id_check(c, i);
    return c->genre[i];
}

int corpus_sample_segment(const corpus_t *c, int64_t i)
{
    id_check(c, i);
    return c->segment[i];
}

int32_t corpus_sample_novel(const corpus_t *c, int64_t i)
{
    id_check(c, i);
    return c->novel[i];
}

int64_t corpus_sample_file_index(const corpus_t *c, int64_t i)
{
    id_check(c, i);
    return c->index[i];
}

typedef struct request {
    int64_t start;
    int32_t len;
    int k; /* position in the caller's ids */
} request_t;

static int request_cmp(const void *a, const void *b)
{
    const request_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void corpus_read_samples(corpus_t *c, const int64_t *ids, int n, int32_t *tokens_out)
{
    if (n <= 0)
        return;
    request_t *req = fb_malloc((size_t)n * sizeof *req);
    int64_t *out_at = fb_malloc((size_t)n * sizeof *out_at);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        id_check(c, ids[k]);
        req[k] = (request_t){.start = c->start[ids[k]], .len = c->len[ids[k]], .k = k};
        out_at[k] = at;
        at += c->len[ids[k]];
    }
    /* HDF5 delivers a union of hyperslabs in file order: sort, read a
     * repeated sample once, and merge neighbouring samples into one block.
     * Samples never overlap in /tokens, so a start either repeats the
     * previous one or lies at or past its end. */
    qsort(req, (size_t)n, sizeof *req, request_cmp);
    int64_t *buf_at = fb_malloc((size_t)n * sizeof *buf_at);
    hid_t fspace = H5Dget_space(c->tokens);
    CHECK_H5(fspace);
    int64_t total = 0, block_start = -1, block_end = -1;
    int nblocks = 0;
    for (int k = 0; k <= n; k++) {
        if (k < n && k > 0 && req[k].start == req[k - 1].start) {
            buf_at[k] = buf_at[k - 1];
            continue;
        }
        if (k < n && req[k].start == block_end) {
            buf_at[k] = total + (block_end - block_start);
            block_end += req[k].len;
            continue;
        }
        if (block_start >= 0) {
            hsize_t s0[1] = {(hsize_t)block_start}, cnt[1] = {(hsize_t)(block_end - block_start)};
            CHECK_H5(H5Sselect_hyperslab(fspace, nblocks ? H5S_SELECT_OR : H5S_SELECT_SET, s0, NULL, cnt, NULL));
            nblocks++;
            total += block_end - block_start;
        }
        if (k < n) {
            buf_at[k] = total;
            block_start = req[k].start;
            block_end = req[k].start + req[k].len;
        }
    }
    hsize_t mdims[1] = {(hsize_t)total};
    hid_t mspace = H5Screate_simple(1, mdims, NULL);
    CHECK_H5(mspace);
    uint32_t *buf = fb_malloc((size_t)total * sizeof *buf);
    /* the metadata read at open: a failure here is a damaged chunk index
     * or chunk of /tokens */
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    herr_t rc = H5Dread(c->tokens, H5T_NATIVE_UINT32, mspace, fspace, c->dxpl, buf);
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    if (rc < 0)
        fb_fatal(FB_EXIT_DATA, "%s: /tokens cannot be read (damaged file)", c->path);
    CHECK_H5(H5Sclose(mspace));
    CHECK_H5(H5Sclose(fspace));
    /* ids index the embedding: one past the vocabulary (a damaged chunk,
     * a flipped datatype) must stop here, not read past a table */
    for (int64_t i = 0; i < total; i++)
        if (buf[i] >= (uint32_t)c->vocab_size)
            fb_fatal(FB_EXIT_DATA, "%s: /tokens holds id %lu, not below the corpus's vocab_size %d (damaged file)",
                     c->path, (unsigned long)buf[i], c->vocab_size);
    for (int k = 0; k < n; k++)
        for (int32_t t = 0; t < req[k].len; t++)
            tokens_out[out_at[req[k].k] + t] = (int32_t)buf[buf_at[k] + t];
    free(buf);
    free(buf_at);
    free(req);
    free(out_at);
}

/* ------------------------------------------------------------ metadata */

const char *corpus_path(const corpus_t *c) { return c->path; }
const char *corpus_tokenizer_digest(const corpus_t *c) { return c->digest; }
const char *corpus_tokenizer_kind(const corpus_t *c) { return c->kind; }
int corpus_vocab_size(const corpus_t *c) { return c->vocab_size; }
int corpus_max_seq_len(const corpus_t *c) { return c->max_seq_len; }
const char *corpus_sample_unit(const corpus_t *c) { return c->unit; }

/* Widest title this reader takes (prep cuts nothing; a wider dataset is
 * a damaged or foreign file). */
#define CORPUS_TITLE_MAX_WIDTH 65536

static void titles_load(corpus_t *c)
{
    c->titles_loaded = 1;
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    int found = h5_lookup(c->file, "/novels/title");
    if (found < 0)
        fb_fatal(FB_EXIT_DATA, "%s: HDF5 cannot read its metadata: the file is damaged", c->path);
    if (found == 0) {
        CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
        return;
    }
    size_t n = h5_dataset_numel_stored(c->file, "/novels/title");
    hid_t ds = H5Dopen2(c->file, "/novels/title", H5P_DEFAULT);
    hid_t ft = ds >= 0 ? H5Dget_type(ds) : -1;
    size_t width = ft >= 0 ? H5Tget_size(ft) : 0;
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) != 0 || width == 0 ||
        width > CORPUS_TITLE_MAX_WIDTH)
        fb_fatal(FB_EXIT_DATA, "%s: /novels/title is not a dataset of fixed-length strings of at most %d bytes",
                 c->path, CORPUS_TITLE_MAX_WIDTH);
    hid_t mt = H5Tcopy(H5T_C_S1);
    CHECK_H5(mt);
    CHECK_H5(H5Tset_size(mt, width));
    CHECK_H5(H5Tset_strpad(mt, H5T_STR_NULLPAD));
    /* HDF5 converts no string between ASCII and UTF-8: read it as stored */
    H5T_cset_t cset = H5Tget_cset(ft);
    CHECK_H5(cset);
    CHECK_H5(H5Tset_cset(mt, cset));
    char *buf = fb_malloc((n ? n : 1) * width);
    herr_t rc = n ? H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : 0;
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    if (rc < 0)
        fb_fatal(FB_EXIT_DATA, "%s: /novels/title cannot be read (damaged file)", c->path);
    CHECK_H5(H5Tclose(mt));
    CHECK_H5(H5Tclose(ft));
    CHECK_H5(H5Dclose(ds));
    c->titles = buf;
    c->ntitles = n;
    c->title_width = width;
}

const char *corpus_novel_title(corpus_t *c, int32_t novel, char *out, size_t len)
{
    FB_ASSERT(len > 0);
    if (!c->titles_loaded)
        titles_load(c);
    out[0] = 0;
    if (novel < 0 || (size_t)novel >= c->ntitles)
        return out;
    const char *t = c->titles + (size_t)novel * c->title_width;
    size_t k = strnlen(t, c->title_width);
    if (k >= len) {
        k = len - 1;
        while (k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80) /* not inside a UTF-8 character */
            k--;
    }
    memcpy(out, t, k);
    out[k] = 0;
    return out;
}

int32_t corpus_special(const corpus_t *c, const char *name)
{
    char bare[128];
    size_t n = strlen(name);
    if (n >= 4 && strncmp(name, "<|", 2) == 0 && strcmp(name + n - 2, "|>") == 0)
        snprintf(bare, sizeof bare, "token_%.*s", (int)(n - 4), name + 2);
    else
        snprintf(bare, sizeof bare, "token_%s", name);
    if (!attr_exists(c, bare))
        return -1;
    long long id = h5_read_attr_i64(c->file, bare);
    return id >= 0 && id < c->vocab_size ? (int32_t)id : -1;
}

int corpus_check_tokenizer(const corpus_t *c, const tokenizer_t *t)
{
    if (strcmp(c->digest, tokenizer_digest(t)) == 0 && c->vocab_size == tokenizer_vocab_size(t))
        return 1;
    fb_warn("%s was made with another tokenizer: %s, vocab %d, sha256 %s; this run's tokenizer is %s, vocab %d, "
            "sha256 %s",
            c->path, c->kind, c->vocab_size, c->digest, tokenizer_kind(t), tokenizer_vocab_size(t),
            tokenizer_digest(t));
    return 0;
}
