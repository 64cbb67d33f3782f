/* `fabula train --dry-run [--world N]`: the whole job checked before any
 * compute (docs/config.md, "Pre-flight"), and the inputs check every
 * `fabula train` makes first. */
#ifndef FABULA_TRAIN_PREFLIGHT_H
#define FABULA_TRAIN_PREFLIGHT_H

#include "config/config.h"

/* Collective. The files the run reads exist: data.corpus (or else
 * data.train), data.tokenizer unless "bytes". A missing one ends every
 * rank with FB_EXIT_IO naming the key, and for the default config's
 * data.train (relative to the working directory) where it is found. */
void train_inputs_check(const config_t *cfg);

/* Collective (any number of processes; the figures are for a world of
 * `world` ranks, which cfg was loaded for). Opens the corpus and the
 * tokenizer as the run would (their errors and warnings are the run's),
 * plans the first step's data, sizes the memory of a rank with
 * `fabula plan memory`'s functions and says what the run would do: the
 * layout, the model, the data against train_batch_size and data.seq_len,
 * the memory, where it resumes. Rank 0 prints (when `verbose`). */
void train_preflight(const config_t *cfg, int world, int verbose);

#endif
