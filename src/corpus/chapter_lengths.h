/* Sample lengths with the uneven spread of fiction: one sample per chapter.
 *
 * The corpus format (../shared/corpus/SOURCES.md) puts every chapter heading
 * after two blank lines, i.e. a run of three or more '\n'; nothing else has
 * two blank lines in a row. A chapter is the text between such runs (the
 * newlines themselves belong to neither side); its sample is the genre token
 * plus the chapter's bytes, cut to max_seq_len tokens. Empty pieces and
 * samples under 2 tokens (nothing to predict) are skipped. Used by
 * `fabula plan sampler --split chapters` and the loader tests; training
 * itself cuts novels into windows (windows.h). */
#ifndef FABULA_DATA_CHAPTER_LENGTHS_H
#define FABULA_DATA_CHAPTER_LENGTHS_H

#include <stdint.h>

#include "corpus/novels.h"

/* The sample lengths of every chapter of every novel, in file order, in a
 * new array *lens (free()); returns how many. *cut (when not NULL) gets the
 * number of chapters that were longer than max_seq_len. max_seq_len >= 2. */
int64_t chapter_lengths_get(const novel_set_t *set, int max_seq_len, int64_t **lens, int64_t *cut);

#endif
