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

#endif
