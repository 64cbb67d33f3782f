/* The one option parser of the subcommands (private to src/cli).
 *
 * Rules, the same for every subcommand:
 *  - options are --name VALUE, --name=VALUE, or a letter: -x VALUE, -xVALUE;
 *  - options and positional words may come in any order; "--" ends the
 *    options (every later word is positional);
 *  - -h and --help print the command's usage on stdout and exit 0;
 *  - an unknown option, a missing value, a value given to an option that
 *    takes none, and a value of the wrong kind are usage errors: one line
 *    "fabula: error: CMD: ..." naming the option and what was expected
 *    (then, for the first three, the usage) on stderr, exit FB_EXIT_USAGE.
 * A command that runs under MPI sets `mpi`: its usage errors start MPI so
 * that rank 0 alone prints the message and every rank exits cleanly. */
#ifndef FABULA_CLI_CLI_ARGS_H
#define FABULA_CLI_CLI_ARGS_H

#include <stdio.h>

#include "util/error.h"

typedef struct cli_option {
    const char *name; /* long name without "--" */
    char letter;      /* the one-letter form (-x), or 0 */
    int takes_value;
    int id;           /* what cli_args_next returns for it (> 0) */
} cli_option_t;

typedef struct cli_args {
    const char *cmd;             /* "tokenizer train": messages say "fabula tokenizer train" */
    void (*usage)(FILE *);
    const cli_option_t *options; /* ends with a {0} entry */
    int mpi;
    int *argc;
    char ***argv;
    int next;                    /* the next word to read */
    int options_done;            /* "--" seen */
    const char *option;          /* the option just read, as "--name" */
    const char *value;           /* its value, or NULL */
    char **positional;           /* the positional words, in order */
    int npositional;
} cli_args_t;

/* argv[0] is the command's own name and is skipped. */
void cli_args_init(cli_args_t *a, const char *cmd, void (*usage)(FILE *), const cli_option_t *options, int mpi,
                   int *argc, char ***argv);
void cli_args_free(cli_args_t *a);

/* The id of the next option (its value in a->value), or 0 when every word
 * has been read. Handles --help and the structural errors itself. */
int cli_args_next(cli_args_t *a);

/* The value of the option just read as a whole decimal integer in [lo, hi]
 * or a number in [lo, hi] (or [lo, hi) with hi_open); else a usage error. */
long long cli_args_int(const cli_args_t *a, long long lo, long long hi);
double cli_args_real(const cli_args_t *a, double lo, double hi, int hi_open);
/* The same for one part `s` of the value (an item of a comma list). */
long long cli_args_int_of(const cli_args_t *a, const char *s, long long lo, long long hi);

/* A usage error: the message (with the usage after it when with_usage). */
FB_NORETURN void cli_args_fail(const cli_args_t *a, int with_usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
