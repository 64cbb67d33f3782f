/* The input files of a corpus job (`fabula prep`, `fabula tokenizer train`)
 * and how ranks share them.
 *
 * Listing: each path named, in the order given; a file as it is, a
 * directory as its *.json, *.jsonl and *.ndjson files (any case; not
 * recursive; names starting with '.' skipped; only regular files), sorted
 * by name (strcmp). A *.json file is one JSON document; any other file is
 * JSON Lines.
 *
 * Sharing: the files, in list order, are laid end to end as one byte
 * stream of T bytes. Rank r of P owns the stream positions
 * [floor(T*r/P), floor(T*(r+1)/P)) (the last rank also owns position T). A
 * JSON Lines record belongs to the rank owning the position of its line's
 * first byte; a .json document (one novel or an array of novels) belongs
 * to the rank owning the position of the file's first byte. So every rank
 * reads about T/P bytes, files are shared when there are fewer files than
 * ranks, and the ranks' records, taken in rank order, are all records in
 * input order, whatever the rank count. */
#ifndef FABULA_CORPUS_INPUTS_H
#define FABULA_CORPUS_INPUTS_H

#include <stdint.h>

typedef struct corpus_input_file {
    char *path;
    int64_t size;
    int64_t start;   /* position of its first byte in the stream */
    int is_document; /* *.json: one JSON document, never split */
} corpus_input_file_t;

typedef struct corpus_inputs {
    corpus_input_file_t *files;
    int n;
    int64_t total; /* T */
} corpus_inputs_t;

/* Lists the files of `paths`. Every rank calls it alike and fails alike:
 * a missing or unreadable path exits FB_EXIT_IO, a directory without any
 * input file FB_EXIT_DATA, no path at all FB_EXIT_USAGE; rank 0 names the
 * path once and every rank leaves MPI cleanly (fb_fatal_all). */
void corpus_inputs_list(corpus_inputs_t *in, const char *const *paths, int npaths);
void corpus_inputs_free(corpus_inputs_t *in);

/* Rank `rank`'s positions [*begin, *end) of the stream. */
void corpus_inputs_share(const corpus_inputs_t *in, int rank, int nranks, int64_t *begin, int64_t *end);

#endif
