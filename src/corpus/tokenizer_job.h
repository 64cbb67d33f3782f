/* The tokenizer-training job behind `fabula tokenizer train`: every rank
 * counts the pre-tokens of its share of the novels (corpus/inputs.h), rank
 * 0 gathers and merges the counts, learns the BPE merges
 * (tokenizer/bpe_train.h) and writes the fabula tokenizer file. The counts
 * are sums, so any number of ranks writes the same file. */
#ifndef FABULA_CORPUS_TOKENIZER_JOB_H
#define FABULA_CORPUS_TOKENIZER_JOB_H

#include "tokenizer/bytetok.h"

/* The tokens a trained tokenizer has besides its merges: the 256 bytes and
 * the specials; vocab_size is at least this. */
#define TOKENIZER_JOB_MIN_VOCAB BYTETOK_VOCAB

typedef struct tokenizer_job {
    const char *const *inputs; /* files or directories */
    int ninputs;
    const char *output;        /* the tokenizer file */
    long long vocab_size;      /* specials included, >= TOKENIZER_JOB_MIN_VOCAB */
    long long min_frequency;   /* >= 1 */
    int force;                 /* replace an existing output */
} tokenizer_job_t;

/* Collective over the world (MPI up). Errors every rank meets alike (an
 * existing output without force, a missing input, an input directory
 * without input files, no novel at all) are printed once by rank 0 and
 * every rank exits with the documented code. Returns FB_EXIT_OK. */
int tokenizer_job_run(const tokenizer_job_t *job);

#endif
