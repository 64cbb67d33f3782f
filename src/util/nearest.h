/* The nearest of a list of names to a word a user typed: the "did you mean"
 * of unknown config keys (src/config) and command-line options and
 * commands (src/cli). */
#ifndef FABULA_UTIL_NEAREST_H
#define FABULA_UTIL_NEAREST_H

#include <stddef.h>

/* Edit distance with adjacent transpositions ("stgae" -> "stage" is 1);
 * (size_t)-1 for names longer than 255 bytes. */
size_t nearest_distance(const char *a, const char *b);

/* How far a name may be from another to be suggested: a quarter of its
 * length, 1 to 3 edits (short names would match anything). */
size_t nearest_close_enough(const char *word);

/* The name of names[0..n) nearest to `word` within
 * nearest_close_enough(word) edits (the first of equals), or NULL. */
const char *nearest_name(const char *word, const char *const *names, size_t n);

#endif
