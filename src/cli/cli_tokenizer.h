/* The `fabula tokenizer` subcommands (private to src/cli). */
#ifndef FABULA_CLI_CLI_TOKENIZER_H
#define FABULA_CLI_CLI_TOKENIZER_H

int cli_tokenizer_train(int argc, char **argv);

/* Parses a whole decimal integer in [lo, hi]; exits FB_EXIT_USAGE naming
 * the option otherwise. */
long long cli_parse_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi);

#endif
