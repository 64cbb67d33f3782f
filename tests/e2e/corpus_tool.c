/* Test helper for the corpus shell tests (not installed).
 *
 *   corpus_tool digest FILE          every dataset and root attribute, by
 *                                    name: type size, element count and an
 *                                    FNV-1a hash of the stored bytes
 *   corpus_tool count FILE ID        occurrences of token ID in /tokens
 *   corpus_tool text FILE NOVEL      the bytes of novel NOVEL's samples on
 *                                    stdout, genre tokens and chapter
 *                                    separators left out, samples in order
 *                                    (with --overlap 0 that is its content)
 *   corpus_tool lengths FILE         "NOVEL LENGTH" of every sample, one a line,
 *                                    in file order (both splits)
 *   corpus_tool novels FILE SPLIT    the novels of SPLIT's samples, one a line,
 *                                    through the reader API
 *   corpus_tool open FILE SPLIT      corpus_open: samples, tokens, digest
 *   corpus_tool check FILE TOKENIZER corpus_check_tokenizer: exit 0 same
 *                                    tokenizer, 3 another one
 *   corpus_tool set-int FILE NAME V  replace a root attribute
 *   corpus_tool set-str FILE NAME V
 *   corpus_tool unlink FILE PATH     remove a dataset
 *   corpus_tool extent FILE PATH N   replace a 1-D dataset by one of extent N
 *                                    (chunked, nothing written: it reads as
 *                                    fill values)
 *
 * digest, count, text, lengths, set-*, unlink and extent use plain serial HDF5, independent
 * of the reader under test. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/corpus.h"
#include "tokenizer/tokenizer.h"
#include "io/h5tensor.h"
#include "parallel/world.h"
#include "util/error.h"

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

static herr_t dataset_digest(hid_t obj, const char *name, const H5O_info_t *info, void *unused)
{
    (void)unused;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
    CHECK_H5(d);
    hid_t ft = H5Dget_type(d), space = H5Dget_space(d);
    CHECK_H5(ft);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    size_t el = H5Tget_size(ft);
    /* Read as stored: the file type is the memory type, no conversion. */
    void *buf = fb_malloc((size_t)n * el + 1);
    CHECK_H5(H5Dread(d, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
    printf("dataset /%s size %zu n %lld fnv %016llx\n", name, el, (long long)n,
           (unsigned long long)fnv1a(buf, (size_t)n * el, 0xcbf29ce484222325ULL));
    free(buf);
    H5Sclose(space);
    H5Tclose(ft);
    H5Dclose(d);
    return 0;
}

static herr_t attr_digest(hid_t obj, const char *name, const H5A_info_t *ainfo, void *unused)
{
    (void)ainfo;
    (void)unused;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    CHECK_H5(a);
    hid_t ft = H5Aget_type(a), space = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    size_t el = H5Tget_size(ft);
    void *buf = fb_malloc((size_t)n * el + 1);
    CHECK_H5(H5Aread(a, ft, buf));
    printf("attr %s size %zu n %lld fnv %016llx\n", name, el, (long long)n,
           (unsigned long long)fnv1a(buf, (size_t)n * el, 0xcbf29ce484222325ULL));
    free(buf);
    H5Sclose(space);
    H5Tclose(ft);
    H5Aclose(a);
    return 0;
}

static int cmd_digest(const char *path)
{
    hid_t f = h5_open_read(path);
    CHECK_H5(H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, dataset_digest, NULL));
    CHECK_H5(H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, attr_digest, NULL));
    h5_close(f);
    return 0;
}

static uint32_t *tokens_read(hid_t f, size_t *n)
{
    *n = h5_dataset_numel(f, "/tokens", NULL, NULL);
    uint32_t *t = fb_malloc(*n * sizeof *t + 1);
    hid_t d = H5Dopen2(f, "/tokens", H5P_DEFAULT);
    CHECK_H5(d);
    CHECK_H5(H5Dread(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, t));
    H5Dclose(d);
    return t;
}

static int cmd_count(const char *path, long long id)
{
    hid_t f = h5_open_read(path);
    size_t n;
    uint32_t *t = tokens_read(f, &n);
    long long count = 0;
    for (size_t i = 0; i < n; i++)
        count += t[i] == (uint32_t)id;
    printf("%lld\n", count);
    free(t);
    h5_close(f);
    return 0;
}

static int cmd_text(const char *path, long long novel)
{
    hid_t f = h5_open_read(path);
    size_t ns = h5_dataset_numel(f, "/samples/novel", NULL, NULL);
    long long *off = fb_malloc((ns + 1) * sizeof *off);
    int *nov = fb_malloc(ns * sizeof *nov + 1);
    h5_read_i64(f, "/samples/offset", off, ns + 1);
    h5_read_i32(f, "/samples/novel", nov, ns);
    long long sep = h5_read_attr_i64(f, "token_chapter_sep");
    size_t n;
    uint32_t *t = tokens_read(f, &n);
    for (size_t i = 0; i < ns; i++) {
        if (nov[i] != novel)
            continue;
        for (long long k = off[i] + 1; k < off[i + 1]; k++) {
            if (t[k] == (uint32_t)sep)
                continue;
            if (t[k] > 255) {
                fprintf(stderr, "corpus_tool: token %u is not a byte (use the bytes tokenizer)\n", t[k]);
                return 1;
            }
            putchar((int)t[k]);
        }
    }
    free(t);
    free(off);
    free(nov);
    h5_close(f);
    return 0;
}

static int cmd_lengths(const char *path)
{
    hid_t f = h5_open_read(path);
    size_t ns = h5_dataset_numel(f, "/samples/novel", NULL, NULL);
    long long *off = fb_malloc((ns + 1) * sizeof *off);
    int *nov = fb_malloc(ns * sizeof *nov + 1);
    h5_read_i64(f, "/samples/offset", off, ns + 1);
    h5_read_i32(f, "/samples/novel", nov, ns);
    for (size_t i = 0; i < ns; i++)
        printf("%d %lld\n", nov[i], off[i + 1] - off[i]);
    free(off);
    free(nov);
    h5_close(f);
    return 0;
}

static int cmd_set(const char *path, const char *name, const char *value, int is_int)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK_H5(f);
    if (H5Aexists(f, name) > 0)
        CHECK_H5(H5Adelete(f, name));
    if (is_int)
        h5_write_attr_i64(f, name, atoll(value));
    else
        h5_write_attr_string(f, name, value);
    CHECK_H5(H5Fclose(f));
    return 0;
}

static int cmd_unlink(const char *path, const char *dset)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK_H5(f);
    CHECK_H5(H5Ldelete(f, dset, H5P_DEFAULT));
    CHECK_H5(H5Fclose(f));
    return 0;
}

/* Replaces dataset DSET by one of the same type and extent N whose chunks
 * are never written: what it declares, the file does not hold. */
static int cmd_extent(const char *path, const char *dset, long long n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK_H5(f);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    CHECK_H5(d);
    hid_t ft = H5Dget_type(d);
    CHECK_H5(ft);
    CHECK_H5(H5Dclose(d));
    CHECK_H5(H5Ldelete(f, dset, H5P_DEFAULT));
    hsize_t dims[1] = {(hsize_t)n}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {1024};
    hid_t space = H5Screate_simple(1, dims, maxdims), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_H5(space);
    CHECK_H5(dcpl);
    CHECK_H5(H5Pset_chunk(dcpl, 1, chunk));
    d = H5Dcreate2(f, dset, ft, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK_H5(d);
    CHECK_H5(H5Dclose(d));
    CHECK_H5(H5Pclose(dcpl));
    CHECK_H5(H5Sclose(space));
    CHECK_H5(H5Tclose(ft));
    CHECK_H5(H5Fclose(f));
    return 0;
}

/* The reader API commands run under MPI. */
static int cmd_reader(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    const char *cmd = argv[1], *path = argv[2];
    int code = 0;
    if (!strcmp(cmd, "open") || !strcmp(cmd, "novels")) {
        corpus_t *c = corpus_open(path, atoi(argv[3]));
        if (!strcmp(cmd, "open")) {
            printf("samples %lld tokens %lld vocab %d tokenizer %s %s\n", (long long)corpus_num_samples(c),
                   (long long)corpus_num_tokens(c), corpus_vocab_size(c), corpus_tokenizer_kind(c),
                   corpus_tokenizer_digest(c));
        } else {
            for (int64_t i = 0; i < corpus_num_samples(c); i++)
                if (i == 0 || corpus_sample_novel(c, i) != corpus_sample_novel(c, i - 1))
                    printf("%d\n", corpus_sample_novel(c, i));
        }
        corpus_close(c);
    } else {
        corpus_t *c = corpus_open(path, CORPUS_TRAIN);
        tokenizer_t *t = tokenizer_load(argv[3]);
        code = corpus_check_tokenizer(c, t) ? 0 : FB_EXIT_DATA;
        printf("%s\n", code ? "different tokenizer" : "same tokenizer");
        tokenizer_free(t);
        corpus_close(c);
    }
    parallel_finalize();
    return code;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: corpus_tool digest|count|text|lengths|novels|open|check|set-int|set-str|unlink|extent FILE ...\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "digest"))
        return cmd_digest(argv[2]);
    if (!strcmp(cmd, "count") && argc == 4)
        return cmd_count(argv[2], atoll(argv[3]));
    if (!strcmp(cmd, "lengths") && argc == 3)
        return cmd_lengths(argv[2]);
    if (!strcmp(cmd, "text") && argc == 4)
        return cmd_text(argv[2], atoll(argv[3]));
    if ((!strcmp(cmd, "set-int") || !strcmp(cmd, "set-str")) && argc == 5)
        return cmd_set(argv[2], argv[3], argv[4], !strcmp(cmd, "set-int"));
    if (!strcmp(cmd, "unlink") && argc == 4)
        return cmd_unlink(argv[2], argv[3]);
    if (!strcmp(cmd, "extent") && argc == 5)
        return cmd_extent(argv[2], argv[3], atoll(argv[4]));
    if ((!strcmp(cmd, "open") || !strcmp(cmd, "novels") || !strcmp(cmd, "check")) && argc == 4)
        return cmd_reader(argc, argv);
    fprintf(stderr, "corpus_tool: bad command line\n");
    return 2;
}
