/* The job behind `fabula tokenizer encode`: every novel of a file encoded
 * with a tokenizer on one rank's OpenMP threads, the ids written as
 * little-endian uint32 (per novel a count n, then n ids), the throughput
 * printed (docs/tokenizer.md). */
#ifndef FABULA_CORPUS_ENCODE_JOB_H
#define FABULA_CORPUS_ENCODE_JOB_H

typedef struct encode_job {
    const char *tokenizer;  /* "bytes", a fabula tokenizer file or a tokenizer.json */
    const char *input;      /* novels (.json or .jsonl) */
    const char *output;     /* the ids file, written atomically */
    int verify;             /* decode every novel back and compare */
} encode_job_t;

/* One rank (MPI up). Returns FB_EXIT_OK, or FB_EXIT_INTERNAL when --verify
 * found a novel that does not round-trip. */
int encode_job_run(const encode_job_t *job);

#endif
