/* The sample lengths the planner runs the step plan on (`plan sampler`,
 * `plan time`): from novels, a lengths file or a corpus. */
#ifndef FABULA_PLAN_PLAN_LENGTHS_H
#define FABULA_PLAN_PLAN_LENGTHS_H

#include <stdint.h>

#include "corpus/corpus.h"

/* From novels (`jsonl`, split "windows" or "chapters", byte tokenizer) or
 * a lengths file (one integer a line, '#' comments), cut to max_seq_len
 * (*cut counts those). Fatal errors on bad input; *lens is the caller's
 * to free. Returns the count. */
int64_t plan_lengths_read(const char *jsonl, const char *lengths_file, const char *split, int max_seq_len,
                          int64_t **lens, int64_t *cut);
/* The training split's sample lengths of an open corpus, as training reads
 * them (a sample longer than max_seq_len cut to it). */
int64_t plan_lengths_of_corpus(const corpus_t *c, int max_seq_len, int64_t **lens, int64_t *cut);

#endif
