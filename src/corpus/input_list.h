/* The input files of a corpus command (`fabula tokenizer train --input`):
 * each named file as given, and for a directory its *.json, *.jsonl and
 * *.ndjson files (not recursive), sorted by name, with their sizes. */
#ifndef FABULA_DATA_INPUT_LIST_H
#define FABULA_DATA_INPUT_LIST_H

#include <stddef.h>

typedef struct input_list {
    char **path;
    size_t *size;
    int n;
} input_list_t;

/* A missing or unreadable path exits FB_EXIT_IO; a directory without any
 * input file exits FB_EXIT_DATA; both name the path. */
void input_list_collect(input_list_t *l, const char *const *paths, int npaths);
void input_list_free(input_list_t *l);

/* Which rank reads each file when the files are shared out by size: the
 * largest first, each to the rank with the fewest bytes so far (lowest rank
 * on ties). owner[i] for i < l->n. */
void input_list_assign(const input_list_t *l, int nranks, int *owner);

#endif
