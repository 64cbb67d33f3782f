/* `fabula plan sampler`: the training step plan (sampler or curriculum,
 * balancer, packer, deferrals) run on a corpus's real sample lengths for
 * any number of simulated ranks, no MPI and no model (docs/loader.md). */
#ifndef FABULA_PLAN_PLAN_SAMPLER_H
#define FABULA_PLAN_PLAN_SAMPLER_H

#include "config/config.h"

#define PLAN_SAMPLER_MAX_RANK_COUNTS 32

typedef struct plan_sampler_opts {
    const char *jsonl, *lengths_file, *split, *corpus; /* one of jsonl, lengths_file and corpus */
    const char *unit;       /* --corpus: its sample unit (filled in) */
    int ranks[PLAN_SAMPLER_MAX_RANK_COUNTS], nranks_list;
    long steps;
    int batch, max_seq_len, accum; /* max_seq_len 0: the corpus's, else data.seq_len */
    long long max_tokens;
    double c;
    int have_c, have_seed;  /* 0: the config's attention cost, its seed */
    unsigned long long seed;
} plan_sampler_opts_t;

/* Resolves cfg (model_config_resolve), reads the lengths (a corpus through
 * MPI-IO: the caller has started MPI when o->corpus is set), checks the
 * options against them (fatal, exit 2) and prints the table. Returns the
 * exit code. */
int plan_sampler_run(config_t *cfg, plan_sampler_opts_t *o);

#endif
