/* Novels read from JSON text: the input of the single-rank data path (the
 * byte tokenizer trains directly on these; the HDF5 corpus comes later).
 *
 * Accepted files (docs/data.md):
 *   *.json   one object, or an array of objects;
 *   others   JSON Lines: one object per line, blank lines skipped.
 * Fields: "content" (string, required, non-empty), "genre" (string,
 * optional), "title" (string, optional); all others are ignored. */
#ifndef FABULA_DATA_NOVELS_H
#define FABULA_DATA_NOVELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct novel {
    uint8_t *content;  /* the text's bytes, exactly as in the file (owned) */
    size_t len;        /* bytes in content (> 0; may include 0 bytes) */
    int genre;         /* enum bytetok_genre */
    char *title;       /* owned, NULL when the record has none */
} novel_t;

typedef struct novel_set {
    novel_t *novels;
    int n;
    long n_malformed;   /* lines (or array items) that are not a JSON object */
    long n_no_content;  /* records skipped: content missing, not a string, or empty */
    long n_other_genre; /* records whose genre was not recognised, read as "other" */
    size_t total_bytes; /* sum of len */
} novel_set_t;

/* Fills *set from the file at `path` (resolved by data_path_resolve).
 * Unreadable file: exit FB_EXIT_IO. Bad records are skipped with a warning
 * naming FILE:LINE; no usable novel at all, or a .json file that does not
 * parse: exit FB_EXIT_DATA. */
void novels_load(novel_set_t *set, const char *path);

void novels_free(novel_set_t *set);

/* ---- the record rules, shared with the input reader (input_reader.c) ----
 * Both read the same records the same way; each words, counts and places
 * the problems its own way (novels_load warns at once, prep collects them
 * per rank), so these return what is wrong rather than printing it. */

struct json_t;
struct json_error_t;

/* The whole file at `path`. Unreadable: exit FB_EXIT_IO with "cannot open
 * WHAT PATH: ..." (`what` names the file's role: "corpus", "input"). */
uint8_t *novels_file_read(const char *path, const char *what, size_t *n);

/* Parses one JSON text (a line, or a whole .json file) with jansson,
 * carrying invalid UTF-8 through the utf8_guard markers (*guarded says
 * whether they were needed). NULL with *err filled on failure. A number
 * jansson cannot hold (1e999, a 30-digit integer) does not fail the text:
 * it is read as a double, or as null beyond the double range (no field a
 * novel is read from is a number). When `dup` is given (dupcap bytes), it
 * receives the path of the first key given twice in one object ("" if
 * none): jansson keeps the last value. */
struct json_t *novels_json_parse(const uint8_t *text, size_t n, int *guarded, char *dup, size_t dupcap,
                                 struct json_error_t *err);

/* A NUL-terminated copy of a JSON string's bytes (which may hold 0 bytes),
 * with the utf8_guard markers turned back into the original bytes when the
 * text was `guarded`. */
uint8_t *novels_json_string_copy(const struct json_t *s, int guarded, size_t *len);

typedef enum { NOVEL_RECORD_OK, NOVEL_RECORD_NOT_OBJECT, NOVEL_RECORD_NO_CONTENT } novel_record_status_t;
typedef enum { NOVEL_GENRE_OK, NOVEL_GENRE_UNKNOWN, NOVEL_GENRE_NOT_STRING } novel_genre_issue_t;

/* One record's fields as the rules of docs/data.md read them. Pointers
 * point into the JSON value, which must outlive this. */
typedef struct novel_record {
    novel_record_status_t status;
    const char *why;                /* NO_CONTENT: "no \"content\" field", ... */
    const struct json_t *content;   /* OK: a non-empty string */
    int genre;                      /* enum bytetok_genre: UNKNOWN when absent or null, OTHER when odd */
    novel_genre_issue_t genre_issue;
    const char *genre_name;         /* GENRE_UNKNOWN: the unrecognised name */
    const struct json_t *title;     /* a string, or NULL */
} novel_record_t;

/* Reads the record `obj` into *rec; the genre and title are looked at only
 * when the status is OK. */
void novels_record_read(novel_record_t *rec, const struct json_t *obj);

#endif
