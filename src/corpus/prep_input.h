/* The inputs of `fabula prep`: which files, how ranks share them, and the
 * novels of one rank's share read record by record.
 *
 * The files, in command-line order (a directory: its *.json, *.jsonl and
 * *.ndjson files, sorted by name), are laid end to end as one byte stream of T
 * bytes. Rank r of P owns the stream positions [floor(T*r/P),
 * floor(T*(r+1)/P)) (the last rank also owns position T). A JSON Lines
 * record belongs to the rank owning the position of its line's first byte;
 * a .json document (one novel or an array of novels) belongs to the rank
 * owning the position of the file's first byte. So every rank reads about
 * T/P bytes, files are shared when there are fewer files than ranks, and
 * the ranks' records, taken in rank order, are all records in input order:
 * a rank's samples form one contiguous block of the output whatever the
 * rank count. */
#ifndef FABULA_DATA_PREP_INPUT_H
#define FABULA_DATA_PREP_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct prep_file {
    char *path;
    int64_t size;
    int64_t start;   /* position of its first byte in the stream */
    int is_document; /* *.json: one JSON document, never split */
} prep_file_t;

typedef struct prep_inputs {
    prep_file_t *files;
    int n;
    int64_t total; /* T */
} prep_inputs_t;

/* Expands the arguments. A missing or unreadable path: FB_EXIT_IO; a
 * directory without any input file: FB_EXIT_DATA; no argument:
 * FB_EXIT_USAGE. */
void prep_inputs_list(prep_inputs_t *in, char *const *args, int nargs);
void prep_inputs_free(prep_inputs_t *in);

/* Rank `rank`'s positions [*begin, *end) of the stream. */
void prep_inputs_share(const prep_inputs_t *in, int rank, int nranks, int64_t *begin, int64_t *end);

/* One novel. Strings and content belong to the reader and stay valid until
 * the next prep_reader_next call. */
typedef struct prep_record {
    const uint8_t *content;
    size_t len;            /* > 0 */
    int genre;             /* enum bytetok_genre */
    const char *title;     /* NULL when absent */
    const char *language;  /* NULL when absent */
    int file;              /* index in prep_inputs_t */
    int64_t line;          /* JSONL: line index in this rank's share of the file (0-based); else -1 */
    int64_t item;          /* .json: 1-based position in the array (1 for a single object); else 0 */
    int64_t invalid_utf8;  /* bytes of content that are not valid UTF-8 (kept) */
} prep_record_t;

/* What was skipped or repaired, per rank (sums over ranks are the totals). */
typedef struct prep_read_counts {
    long long malformed;       /* not JSON, not an object, or a .json that does not parse */
    long long no_content;      /* "content" missing, not a string, or empty */
    long long other_genre;     /* unrecognised genre read as "other" */
    long long invalid_utf8_records;
    long long invalid_utf8_bytes;
    long long bytes_read;      /* of the rank's share */
} prep_read_counts_t;

typedef struct prep_reader prep_reader_t;

/* Reads the records of positions [begin, end). With `strict`, the first
 * malformed record stops the parsing (the remaining lines are only counted)
 * and prep_reader_failed() becomes true. */
prep_reader_t *prep_reader_open(const prep_inputs_t *in, int64_t begin, int64_t end, int strict);

/* The next record (1), or 0 at the end of the share. */
int prep_reader_next(prep_reader_t *r, prep_record_t *rec);

const prep_read_counts_t *prep_reader_counts(const prep_reader_t *r);
int prep_reader_failed(const prep_reader_t *r);

/* Lines of each file whose first byte is in the share (in->n entries). */
const int64_t *prep_reader_lines(const prep_reader_t *r);

/* Prints the warnings (and, with strict, the error) collected while
 * reading, with LINE = line_base[file] + local line + 1. line_base[f]: lines
 * of file f owned by lower ranks (an exclusive prefix sum of
 * prep_reader_lines). At most 20 per file and rank; counts are complete. */
void prep_reader_report(const prep_reader_t *r, const int64_t *line_base);

void prep_reader_close(prep_reader_t *r);

#endif
