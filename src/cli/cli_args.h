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
 *    (then, for the first three, the usage) on stderr, exit FB_EXIT_USAGE;
 *  - an unknown option names the nearest of the command's options ("did
 *    you mean"), else what the command's hint makes of it: for a command
 *    that takes --set, the config key the word names (--lr: --set
 *    optimizer.params.lr=VALUE, another trainer's names included).
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

/* What an unknown option word (without its dashes) may have meant: the
 * tail of the message ("; did you mean '--set KEY=VALUE'?") written into
 * buf, or NULL when nothing. */
typedef const char *(*cli_hint_fn)(const char *word, char *buf, size_t n);

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
    cli_hint_fn hint;            /* cli_hint_config_key for commands with --set; NULL: none */
} cli_args_t;

/* argv[0] is the command's own name and is skipped. */
void cli_args_init(cli_args_t *a, const char *cmd, void (*usage)(FILE *), const cli_option_t *options, int mpi,
                   int *argc, char ***argv);
void cli_args_free(cli_args_t *a);

/* Replaces the hint of unknown options (the default: cli_hint_config_key
 * when the command takes --set, else none). */
void cli_args_set_hint(cli_args_t *a, cli_hint_fn hint);
/* The config key `word` names (config_key_for_word), as "--set KEY=VALUE";
 * another trainer's setting fabula lacks, as what to do instead. */
const char *cli_hint_config_key(const char *word, char *buf, size_t n);

/* "unknown NOUN 'word'" and the nearest of names[0..n) if one is close,
 * for commands that pick a subcommand by a word (fabula plan WHAT). Not
 * collective: the caller prints it. buf receives the text. */
const char *cli_unknown_word(const char *noun, const char *word, const char *const *names, size_t n, char *buf,
                             size_t len);

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
