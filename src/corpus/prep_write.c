/* The corpus file, written by all ranks together through MPI-IO: each rank
 * writes its block of every dataset (a hyperslab at the offsets the prefix
 * sums gave) in collective transfers; the file goes to a temporary name,
 * and only a complete, closed, fsynced file is renamed to the output. */
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "corpus/corpus.h"
#include "corpus/prep_shard.h"
#include "io/h5tensor.h"
#include "parallel/comm.h"
#include "parallel/mpi_io.h"
#include "parallel/world.h"
#include "util/error.h"

/* Elements a rank writes in one H5Dwrite: keeps each transfer well under
 * the 2 GiB that MPI-IO counts can address. */
#define WRITE_ROUND_ELEMENTS ((int64_t)1 << 26)
/* Chunk of /tokens: 1 Mi tokens (4 MiB). */
#define TOKENS_CHUNK ((int64_t)1 << 20)

/* The temporary file, removed by the abort cleanup if the job fails. */
static char tmp_path[4096];

static void tmp_remove(void)
{
    if (tmp_path[0])
        unlink(tmp_path);
}

/* A write into the corpus file failed (HDF5 hides errno; a full file
 * system or quota is the usual cause): names the file, the dataset and the
 * room left. The cleanup removes the temporary file. */
static _Noreturn void write_failed(const char *what)
{
    char *copy = fb_strdup(tmp_path);
    struct statvfs vfs;
    char room[96] = "";
    if (statvfs(dirname(copy), &vfs) == 0)
        snprintf(room, sizeof room, " %.1f MB are free there;", (double)vfs.f_bavail * (double)vfs.f_frsize / 1e6);
    free(copy);
    fb_fatal(FB_EXIT_IO, "%s: cannot write %s (is the file system full?%s see the HDF5 error stack above)", tmp_path,
             what, room);
}

/* ------------------------------------------------------------ datasets */

typedef struct write_ctx {
    hid_t file, dxpl;
} write_ctx_t;

/* Creates the 1-D dataset `path` of `total` elements (collective) and
 * writes this rank's elements [start, start + count) from buf. */
static void dataset_write(const write_ctx_t *w, const char *path, hid_t ftype, hid_t mtype, int64_t total,
                          int64_t chunk, int64_t start, int64_t count, const void *buf)
{
    hsize_t dims[1] = {(hsize_t)total};
    hid_t fspace = H5Screate_simple(1, dims, NULL);
    CHECK_H5(fspace);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_H5(dcpl);
    CHECK_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    if (chunk > 0) {
        hsize_t cdims[1] = {(hsize_t)(chunk < total ? chunk : total)};
        CHECK_H5(H5Pset_chunk(dcpl, 1, cdims));
    }
    hid_t dset = H5Dcreate2(w->file, path, ftype, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (dset < 0)
        write_failed(path);
    CHECK_H5(H5Pclose(dcpl));

    size_t elsize = H5Tget_size(mtype);
    FB_ASSERT(elsize > 0);
    long long rounds = (count + WRITE_ROUND_ELEMENTS - 1) / WRITE_ROUND_ELEMENTS;
    comm_allreduce(comm_world(), &rounds, 1, COMM_I64, COMM_MAX);
    for (long long k = 0; k < rounds; k++) {
        int64_t off = k * WRITE_ROUND_ELEMENTS;
        int64_t n = count - off < WRITE_ROUND_ELEMENTS ? count - off : WRITE_ROUND_ELEMENTS;
        hsize_t mdims[1] = {(hsize_t)(n > 0 ? n : 1)};
        hid_t mspace = H5Screate_simple(1, mdims, NULL);
        CHECK_H5(mspace);
        if (n > 0) {
            hsize_t fstart[1] = {(hsize_t)(start + off)}, fcount[1] = {(hsize_t)n};
            CHECK_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, fstart, NULL, fcount, NULL));
        } else {
            /* Collective: a rank with nothing left still takes part. */
            CHECK_H5(H5Sselect_none(fspace));
            CHECK_H5(H5Sselect_none(mspace));
        }
        static const char dummy[16];
        const void *p = n > 0 ? (const char *)buf + (size_t)off * elsize : dummy;
        if (H5Dwrite(dset, mtype, mspace, fspace, w->dxpl, p) < 0)
            write_failed(path);
        CHECK_H5(H5Sclose(mspace));
    }
    CHECK_H5(H5Sclose(fspace));
    if (H5Dclose(dset) < 0)
        write_failed(path);
}

/* A fixed-length UTF-8 string type of `width` bytes, null-padded. */
static hid_t string_type(size_t width)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    CHECK_H5(t);
    CHECK_H5(H5Tset_size(t, width));
    CHECK_H5(H5Tset_strpad(t, H5T_STR_NULLPAD));
    CHECK_H5(H5Tset_cset(t, H5T_CSET_UTF8));
    return t;
}

/* Strings as a fixed-width dataset; the width is the longest string on any
 * rank, so that every rank creates the same dataset. */
static void strings_write(const write_ctx_t *w, const char *path, int64_t total, int64_t start, int64_t count,
                          const char *const *strs)
{
    long long width = 1;
    for (int64_t i = 0; i < count; i++)
        if ((long long)strlen(strs[i]) > width)
            width = (long long)strlen(strs[i]);
    comm_allreduce(comm_world(), &width, 1, COMM_I64, COMM_MAX);
    char *buf = fb_calloc((size_t)(count > 0 ? count : 1), (size_t)width);
    for (int64_t i = 0; i < count; i++)
        memcpy(buf + (size_t)i * (size_t)width, strs[i], strlen(strs[i]));
    hid_t t = string_type((size_t)width);
    dataset_write(w, path, t, t, total, 0, start, count, buf);
    CHECK_H5(H5Tclose(t));
    free(buf);
}

/* ------------------------------------------------------------ attributes */

static void attrs_write(hid_t file, const prep_shard_t *s, const prep_stats_t *st, const prep_meta_t *meta)
{
    const prep_options_t *opt = meta->opt;
    h5_write_attr_string(file, "format", CORPUS_FORMAT_NAME);
    h5_write_attr_i64(file, "version", CORPUS_FORMAT_VERSION);
    h5_write_attr_string(file, "fabula_version", PACKAGE_VERSION);
    h5_write_attr_i64(file, "vocab_size", tokenizer_vocab_size(meta->tok));
    h5_write_attr_string(file, "tokenizer_digest", tokenizer_digest(meta->tok));
    h5_write_attr_string(file, "tokenizer_kind", tokenizer_kind(meta->tok));
    h5_write_attr_string(file, "tokenizer_source", opt->tokenizer);
    static const char *const fixed[4] = {"token_pad", "token_bos", "token_eos", "token_chapter_sep"};
    for (int i = 0; i < 4 + BYTETOK_NGENRES; i++) {
        char name[64];
        if (i < 4)
            snprintf(name, sizeof name, "%s", fixed[i]);
        else
            snprintf(name, sizeof name, "token_genre_%s", bytetok_genre_name(i - 4));
        h5_write_attr_i64(file, name, meta->special[i]);
    }
    char genres[256] = "", segments[128] = "";
    for (int g = 0; g < BYTETOK_NGENRES; g++)
        snprintf(genres + strlen(genres), sizeof genres - strlen(genres), "%s%s", g ? "," : "", bytetok_genre_name(g));
    for (int k = 0; k < SEGMENT_NTYPES; k++)
        snprintf(segments + strlen(segments), sizeof segments - strlen(segments), "%s%s", k ? "," : "",
                 segment_name(k));
    h5_write_attr_string(file, "genre_names", genres);
    h5_write_attr_string(file, "segment_names", segments);
    h5_write_attr_i64(file, "max_seq_len", opt->max_seq_len);
    h5_write_attr_i64(file, "overlap", opt->overlap);
    h5_write_attr_i64(file, "min_seq_len", opt->min_seq_len);
    h5_write_attr_string(file, "sample_unit", prep_unit_name(opt->unit));
    h5_write_attr_f64(file, "valid_fraction", opt->valid_fraction);
    h5_write_attr_u64(file, "seed", opt->seed);
    h5_write_attr_i64(file, "num_tokens", s->total_tokens);
    h5_write_attr_i64(file, "num_samples", s->total_samples);
    h5_write_attr_i64(file, "num_novels", s->total_novels);
    h5_write_attr_i64(file, "num_files", meta->inputs->n);

    h5_write_attr_i64s(file, "stats_genre_novels", st->genre_novels, BYTETOK_NGENRES);
    h5_write_attr_i64s(file, "stats_genre_samples", st->genre_samples, BYTETOK_NGENRES);
    h5_write_attr_i64s(file, "stats_genre_tokens", st->genre_tokens, BYTETOK_NGENRES);
    h5_write_attr_i64s(file, "stats_segment_samples", st->segment_samples, SEGMENT_NTYPES);
    h5_write_attr_i64s(file, "stats_segment_tokens", st->segment_tokens, SEGMENT_NTYPES);
    long long upper[PREP_LENGTH_BINS];
    for (int b = 0; b < PREP_LENGTH_BINS; b++)
        upper[b] = prep_length_bin_upper(b, opt->max_seq_len);
    h5_write_attr_i64s(file, "stats_length_bin_upper", upper, PREP_LENGTH_BINS);
    h5_write_attr_i64s(file, "stats_length_hist", st->length_hist, PREP_LENGTH_BINS);
    h5_write_attr_i64s(file, "stats_split_novels", st->split_novels, 2);
    h5_write_attr_i64s(file, "stats_split_samples", st->split_samples, 2);
    h5_write_attr_i64s(file, "stats_split_tokens", st->split_tokens, 2);
    h5_write_attr_i64(file, "stats_content_bytes", st->content_bytes);
    h5_write_attr_i64(file, "stats_content_tokens", st->content_tokens);
    h5_write_attr_i64(file, "stats_chapter_seps", st->chapter_seps);
    h5_write_attr_i64(file, "stats_dropped_windows", st->dropped_windows);
    h5_write_attr_i64(file, "stats_novels_without_samples", st->novels_without_samples);
    h5_write_attr_i64(file, "stats_units", st->units);
    h5_write_attr_i64(file, "stats_units_windowed", st->units_windowed);
    h5_write_attr_i64(file, "stats_malformed", st->read.malformed);
    h5_write_attr_i64(file, "stats_no_content", st->read.no_content);
    h5_write_attr_i64(file, "stats_other_genre", st->read.other_genre);
    h5_write_attr_i64(file, "stats_invalid_utf8_novels", st->read.invalid_utf8_records);
    h5_write_attr_i64(file, "stats_invalid_utf8_bytes", st->read.invalid_utf8_bytes);
}

/* ------------------------------------------------------------ layout */

static void samples_write(const write_ctx_t *w, const prep_shard_t *s)
{
    /* Offsets are global token positions; the last rank also writes the
     * closing entry (the total), so /samples/offset has n + 1 entries. */
    int last = parallel_rank() == parallel_size() - 1;
    int64_t *off = fb_malloc((size_t)(s->n + 1) * sizeof *off);
    for (int64_t i = 0; i <= s->n; i++)
        off[i] = s->token_base + s->offset[i];
    dataset_write(w, "/samples/offset", H5T_STD_I64LE, H5T_NATIVE_INT64, s->total_samples + 1, 0, s->sample_base,
                  s->n + last, off);
    free(off);
    dataset_write(w, "/samples/genre", H5T_STD_U8LE, H5T_NATIVE_UINT8, s->total_samples, 0, s->sample_base, s->n,
                  s->genre);
    dataset_write(w, "/samples/segment", H5T_STD_U8LE, H5T_NATIVE_UINT8, s->total_samples, 0, s->sample_base, s->n,
                  s->segment);
    dataset_write(w, "/samples/split", H5T_STD_U8LE, H5T_NATIVE_UINT8, s->total_samples, 0, s->sample_base, s->n,
                  s->split);
    dataset_write(w, "/samples/novel", H5T_STD_I32LE, H5T_NATIVE_INT32, s->total_samples, 0, s->sample_base, s->n,
                  s->novel);
}

/* One int64 field of every local novel, written as /novels/<name>. */
static void novel_field_write(const write_ctx_t *w, const prep_shard_t *s, const char *path, size_t field_offset)
{
    int64_t *v = fb_malloc((size_t)(s->nnovels > 0 ? s->nnovels : 1) * sizeof *v);
    for (int64_t j = 0; j < s->nnovels; j++)
        memcpy(&v[j], (const char *)&s->novels[j] + field_offset, sizeof *v);
    dataset_write(w, path, H5T_STD_I64LE, H5T_NATIVE_INT64, s->total_novels, 0, s->novel_base, s->nnovels, v);
    free(v);
}

static void novels_write(const write_ctx_t *w, const prep_shard_t *s)
{
    size_t n = (size_t)(s->nnovels > 0 ? s->nnovels : 1);
    const char **str = fb_malloc(n * sizeof *str);
    for (int64_t j = 0; j < s->nnovels; j++)
        str[j] = s->novels[j].title;
    strings_write(w, "/novels/title", s->total_novels, s->novel_base, s->nnovels, str);
    for (int64_t j = 0; j < s->nnovels; j++)
        str[j] = s->novels[j].language;
    strings_write(w, "/novels/language", s->total_novels, s->novel_base, s->nnovels, str);
    free(str);

    uint8_t *u8 = fb_malloc(n);
    for (int64_t j = 0; j < s->nnovels; j++)
        u8[j] = (uint8_t)s->novels[j].genre;
    dataset_write(w, "/novels/genre", H5T_STD_U8LE, H5T_NATIVE_UINT8, s->total_novels, 0, s->novel_base, s->nnovels, u8);
    for (int64_t j = 0; j < s->nnovels; j++)
        u8[j] = s->novels[j].split;
    dataset_write(w, "/novels/split", H5T_STD_U8LE, H5T_NATIVE_UINT8, s->total_novels, 0, s->novel_base, s->nnovels, u8);
    free(u8);
    int32_t *file = fb_malloc(n * sizeof *file);
    for (int64_t j = 0; j < s->nnovels; j++)
        file[j] = s->novels[j].file;
    dataset_write(w, "/novels/file", H5T_STD_I32LE, H5T_NATIVE_INT32, s->total_novels, 0, s->novel_base, s->nnovels,
                  file);
    free(file);
    novel_field_write(w, s, "/novels/line", offsetof(prep_novel_t, line));
    novel_field_write(w, s, "/novels/content_bytes", offsetof(prep_novel_t, content_bytes));
    novel_field_write(w, s, "/novels/content_tokens", offsetof(prep_novel_t, content_tokens));
    novel_field_write(w, s, "/novels/chapters", offsetof(prep_novel_t, chapters));
    novel_field_write(w, s, "/novels/invalid_utf8_bytes", offsetof(prep_novel_t, invalid_utf8));
    novel_field_write(w, s, "/novels/first_sample", offsetof(prep_novel_t, first_sample));
    novel_field_write(w, s, "/novels/num_samples", offsetof(prep_novel_t, num_samples));
}

/* Every rank knows the input list; rank 0 writes it. */
static void files_write(const write_ctx_t *w, const corpus_inputs_t *in)
{
    int64_t count = parallel_rank() == 0 ? in->n : 0;
    const char **str = fb_malloc((size_t)in->n * sizeof *str);
    int64_t *bytes = fb_malloc((size_t)in->n * sizeof *bytes);
    for (int f = 0; f < in->n; f++) {
        str[f] = in->files[f].path;
        bytes[f] = in->files[f].size;
    }
    strings_write(w, "/files/path", in->n, 0, count, str);
    dataset_write(w, "/files/bytes", H5T_STD_I64LE, H5T_NATIVE_INT64, in->n, 0, 0, count, bytes);
    free(str);
    free(bytes);
}

static void group_create(hid_t file, const char *name)
{
    hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_H5(g);
    CHECK_H5(H5Gclose(g));
}

/* ------------------------------------------------------------ commit */

static void fsync_path(const char *path, int directory)
{
    int fd = open(path, directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0 || fsync(fd) != 0)
        fb_fatal(FB_EXIT_IO, "cannot fsync %s: %s", path, strerror(errno));
    close(fd);
}

/* Rank 0, after the rename: the file opens as a corpus of the right size. */
static void output_verify(const char *path, const prep_shard_t *s)
{
    hid_t f = h5_open_read(path);
    char *format = h5_read_attr_string(f, "format");
    int ok = strcmp(format, CORPUS_FORMAT_NAME) == 0 &&
             (int64_t)h5_dataset_numel(f, "/samples/offset", NULL, NULL) == s->total_samples + 1 &&
             (int64_t)h5_dataset_numel(f, "/tokens", NULL, NULL) == s->total_tokens;
    free(format);
    h5_close(f);
    if (!ok) {
        unlink(path);
        fb_fatal(FB_EXIT_IO, "%s: the written file does not read back as the corpus just made; removed", path);
    }
}

double prep_shard_write(const prep_shard_t *s, const prep_stats_t *st, const prep_meta_t *meta, int64_t *bytes)
{
    const char *output = meta->opt->output;
    const int rank = parallel_rank();
    double t0 = parallel_wtime();

    /* One temporary name for the job: rank 0's pid. */
    long long id = (long long)getpid();
    comm_bcast(comm_world(), &id, sizeof id, 0);
    if ((size_t)snprintf(tmp_path, sizeof tmp_path, "%s.tmp.%lld", output, id) >= sizeof tmp_path)
        fb_fatal(FB_EXIT_USAGE, "--output path too long");
    /* A clear message for the common failures (the directory went away or
     * became unwritable since the start) before HDF5 prints its stack. */
    char msg[sizeof tmp_path + 128] = "";
    int code = 0;
    if (rank == 0) {
        int fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            snprintf(msg, sizeof msg, "cannot create %s: %s", tmp_path, strerror(errno));
            code = FB_EXIT_IO;
        } else if (close(fd) != 0) {
            snprintf(msg, sizeof msg, "cannot create %s: %s", tmp_path, strerror(errno));
            code = FB_EXIT_IO;
            unlink(tmp_path);
        }
    }
    if (code)
        tmp_path[0] = '\0';
    parallel_agree_outcome(code, msg);
    fb_set_abort_cleanup(tmp_remove);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_H5(fapl);
    CHECK_H5(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST));
    CHECK_H5(H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI));
    parallel_h5_fapl_mpio(fapl, comm_world(), meta->opt->mpi_info);
    CHECK_H5(H5Pset_coll_metadata_write(fapl, 1));
    hid_t file = H5Fcreate(tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot create the HDF5 file (see the HDF5 error stack above)", tmp_path);
    CHECK_H5(H5Pclose(fapl));
    write_ctx_t w = {.file = file, .dxpl = H5Pcreate(H5P_DATASET_XFER)};
    CHECK_H5(w.dxpl);
    parallel_h5_dxpl_collective(w.dxpl);

    group_create(file, "/samples");
    group_create(file, "/novels");
    group_create(file, "/files");
    dataset_write(&w, "/tokens", H5T_STD_U32LE, H5T_NATIVE_UINT32, s->total_tokens, TOKENS_CHUNK, s->token_base,
                  s->ntokens, s->tokens);
    samples_write(&w, s);
    novels_write(&w, s);
    files_write(&w, meta->inputs);
    attrs_write(file, s, st, meta);
    CHECK_H5(H5Pclose(w.dxpl));
    if (H5Fclose(file) < 0)
        write_failed("its metadata (closing the file)");
    comm_barrier(comm_world());

    long long ok = 1;
    if (rank == 0) {
        fsync_path(tmp_path, 0);
        if (rename(tmp_path, output) != 0)
            fb_fatal(FB_EXIT_IO, "cannot rename %s to %s: %s", tmp_path, output, strerror(errno));
        tmp_path[0] = '\0';
        char *dir = fb_strdup(output);
        fsync_path(dirname(dir), 1);
        free(dir);
        output_verify(output, s);
        struct stat sb;
        CHECK_SYS(stat(output, &sb));
        *bytes = (int64_t)sb.st_size;
    }
    comm_bcast(comm_world(), &ok, sizeof ok, 0);
    tmp_path[0] = '\0';
    fb_set_abort_cleanup(NULL);
    return parallel_wtime() - t0;
}
