/* What the data of a run cannot do as the config asks, said once at start
 * with the fix (docs/loader.md, "Start-up checks"): a step larger than the
 * corpus, a data.seq_len above the corpus's longest samples, a length
 * curriculum with nothing to choose from, a packing that leaves the ranks
 * unevenly loaded. Pure functions of the config and
 * the samples' lengths (no MPI), so `fabula train` and its pre-flight say the same.
 * Each returns 1 and writes its message (without "warning:") to msg when it
 * applies, else 0. */
#ifndef FABULA_LOADER_DATA_CHECK_H
#define FABULA_LOADER_DATA_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* The corpus a run trains on, as the checks see it. */
typedef struct data_check_corpus {
    const char *what;        /* its file, for the message */
    const char *unit;        /* "windows", "chapters", "scenes" (prep --split); a text source: "windows" */
    int prepared;            /* a corpus file from `fabula prep` (else data.train, windowed at start) */
    int max_seq_len;         /* prep's --max-seq-len (text: data.seq_len) */
    const int64_t *lens;     /* each training sample's length, cut to data.seq_len */
    int64_t n;
} data_check_corpus_t;

/* train_batch_size above the number of samples: each step repeats them. */
int data_check_batch(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len);
/* data.seq_len above the longest sample prep could make. */
int data_check_seq_len(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len);
/* data.curriculum.enabled with a length class the phases ask for empty, or
 * with 90% or more of the samples in one class. */
int data_check_curriculum(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len);

/* data.packing other than balanced whose planned cost imbalance over the
 * data-parallel ranks (the step plan of the run's first steps, as `fabula
 * plan sampler` runs it) is 5% or more and at least twice balanced
 * packing's: uneven samples (chapters, scenes) in one or two micro-batches
 * per rank. Needs data.attention_cost resolved. */
int data_check_packing(const config_t *cfg, const data_check_corpus_t *c, char *msg, size_t len);

/* The samples of each length class at the curriculum's thresholds. */
void data_check_classes(const loader_config_t *l, const int64_t *lens, int64_t n, int64_t counts[LOADER_NCLASSES]);

#endif
