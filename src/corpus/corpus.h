/* Reading a corpus file made by `fabula prep` (docs/corpus-format.md).
 *
 * Every rank opens the file (collectively, through MPI-IO) and gets the
 * samples of one split: their lengths, genres, segments and novels are
 * loaded at open (8 + 2 + 4 bytes a sample), the tokens are not.
 * corpus_read_samples reads the tokens of the samples a rank asks for and
 * nothing else, in one independent HDF5 read, so ranks read different sets
 * and no rank reads the whole file.
 *
 * Sample ids are indices into the split: 0 .. corpus_num_samples() - 1, in
 * file order. Errors name the file: not a corpus, a newer format version or
 * a missing dataset are FB_EXIT_DATA, an unreadable file FB_EXIT_IO. */
#ifndef FABULA_DATA_CORPUS_H
#define FABULA_DATA_CORPUS_H

#include <stdint.h>

#include "parallel/mpi_io.h"
#include "tokenizer/tokenizer.h"

/* The root attribute "format" and the highest "version" this build reads. */
#define CORPUS_FORMAT_NAME "fabula-corpus"
#define CORPUS_FORMAT_VERSION 1

enum corpus_split { CORPUS_TRAIN = 0, CORPUS_VALID = 1 };

typedef struct corpus corpus_t;

/* Collective over all ranks. */
corpus_t *corpus_open(const char *path, int split);
/* The same with MPI-IO hints for the file (prep.mpi_info; NULL: none). */
corpus_t *corpus_open_hints(const char *path, int split, const mpi_hints_t *hints);
/* Collective over all ranks. */
void corpus_close(corpus_t *c);

int64_t corpus_num_samples(const corpus_t *c);
int32_t corpus_sample_len(const corpus_t *c, int64_t i);
int corpus_sample_genre(const corpus_t *c, int64_t i);   /* enum bytetok_genre */
int corpus_sample_segment(const corpus_t *c, int64_t i); /* enum segment_type */
int32_t corpus_sample_novel(const corpus_t *c, int64_t i);
/* Index of sample i among all samples of the file (both splits). */
int64_t corpus_sample_file_index(const corpus_t *c, int64_t i);
/* Tokens of the split's samples, and the longest sample. */
int64_t corpus_num_tokens(const corpus_t *c);
int32_t corpus_max_sample_len(const corpus_t *c);

/* The tokens of samples ids[0..n) (any order, repeats allowed), laid end to
 * end in that order: tokens_out needs sum(corpus_sample_len(ids[k]))
 * entries. Not collective. */
void corpus_read_samples(corpus_t *c, const int64_t *ids, int n, int32_t *tokens_out);

const char *corpus_path(const corpus_t *c);
const char *corpus_tokenizer_digest(const corpus_t *c);
const char *corpus_tokenizer_kind(const corpus_t *c);
int corpus_vocab_size(const corpus_t *c);
/* The windowing prep used: max_seq_len, overlap, min_seq_len. */
int corpus_max_seq_len(const corpus_t *c);
/* What a sample holds (`fabula prep --split`): "windows", "chapters" or
 * "scenes"; "windows" for a file written before prep had the option. */
const char *corpus_sample_unit(const corpus_t *c);

/* The title of novel row `novel` (corpus_sample_novel) in out[0..len), cut
 * to fit; "" when the record had none or the file stores no titles. Reads
 * /novels/title on first use (not collective); a damaged one: exit 3. */
const char *corpus_novel_title(corpus_t *c, int32_t novel, char *out, size_t len);

/* Id of a special token, by its text ("<|chapter_sep|>") or bare name
 * ("chapter_sep", "genre_wuxia", "pad"); -1 if the corpus has none. */
int32_t corpus_special(const corpus_t *c, const char *name);

/* 1 when the corpus was made with tokenizer `t` (same digest and vocabulary
 * size), else 0 after a warning that names both tokenizers. Training uses
 * this to refuse a corpus from another tokenizer. */
int corpus_check_tokenizer(const corpus_t *c, const tokenizer_t *t);

#endif
