/* `fabula plan calibrate`: the attention cost c of the sampler's cost
 * model measured on this machine, and with a machine file asked for, the
 * machine's rates (probe_machine.h). Collective over the world. */
#ifndef FABULA_PROBE_CALIBRATE_H
#define FABULA_PROBE_CALIBRATE_H

#include "config/config.h"

typedef struct probe_calibrate_opts {
    int shortlen;               /* the short samples' length */
    int longlen;                /* the long samples' length (0: data.seq_len) */
    int tokens;                 /* tokens a pass (0: 2 x longlen; with machine, at least max_tokens_per_batch) */
    int repeats;                /* timed passes a length */
    const char *machine;        /* write a machine file here (NULL: the attention cost only) */
    const char *name;           /* the machine file's name (NULL: cpu-this, gpu-this on CUDA) */
    const char *config_name;    /* the config file named in the machine file */
    const char *command;        /* the command line and date (probe_command_line) */
    int cpu_clock;              /* time the passes in process CPU seconds */
    int use_data;               /* the config's training tokens instead of random ids */
} probe_calibrate_opts_t;

/* Collective: resolves cfg (model_config_resolve), measures and prints;
 * checks the lengths against the config (fatal, exit 2). Returns the exit
 * code. */
int probe_calibrate(config_t *cfg, const probe_calibrate_opts_t *o);

/* "fabula plan calibrate ARGS on DATE UTC" (argv[0] is "calibrate"), for
 * the machine file's "calibrated"; the caller frees it. */
char *probe_command_line(int argc, char **argv);

#endif
