/* The novels of one rank's share of the inputs (corpus/inputs.h), read
 * record by record, with the problems met on the way collected for one
 * report per rank: what `fabula prep` and `fabula tokenizer train` read. */
#ifndef FABULA_CORPUS_INPUT_READER_H
#define FABULA_CORPUS_INPUT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "corpus/inputs.h"

/* One novel. Strings and content belong to the reader and stay valid until
 * the next input_reader_next call. */
typedef struct input_record {
    const uint8_t *content;
    size_t len;            /* > 0 */
    int genre;             /* enum bytetok_genre */
    const char *title;     /* NULL when absent */
    const char *language;  /* NULL when absent */
    int file;              /* index in corpus_inputs_t */
    int64_t line;          /* JSONL: line index in this rank's share of the file (0-based); else -1 */
    int64_t item;          /* .json: 1-based position in the array (1 for a single object); else 0 */
    int64_t invalid_utf8;  /* bytes of content that are not valid UTF-8 (kept) */
} input_record_t;

/* What was skipped or repaired, per rank (sums over ranks are the totals). */
typedef struct input_read_counts {
    long long malformed;       /* not JSON, not an object, or a .json that does not parse */
    long long no_content;      /* "content" missing, not a string, or empty */
    long long other_genre;     /* unrecognised genre read as "other" */
    long long invalid_utf8_records;
    long long invalid_utf8_bytes;
    long long bytes_read;      /* of the rank's share */
} input_read_counts_t;

typedef struct input_reader input_reader_t;

/* Reads the records of positions [begin, end). With `strict`, the first
 * malformed record stops the parsing (the remaining lines are only counted)
 * and input_reader_failed() becomes true. */
input_reader_t *input_reader_open(const corpus_inputs_t *in, int64_t begin, int64_t end, int strict);

/* The next record (1), or 0 at the end of the share. */
int input_reader_next(input_reader_t *r, input_record_t *rec);

const input_read_counts_t *input_reader_counts(const input_reader_t *r);
int input_reader_failed(const input_reader_t *r);

/* Lines of each file whose first byte is in the share (in->n entries). */
const int64_t *input_reader_lines(const input_reader_t *r);

/* Prints the warnings (and, with strict, the error) collected while
 * reading, with LINE = line_base[file] + local line + 1. line_base[f]: lines
 * of file f owned by lower ranks (an exclusive prefix sum of
 * input_reader_lines). At most 20 per file and rank; counts are complete. */
void input_reader_report(const input_reader_t *r, const int64_t *line_base);

void input_reader_close(input_reader_t *r);

#endif
