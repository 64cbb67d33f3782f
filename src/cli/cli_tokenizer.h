/* The `fabula tokenizer` subcommands (private to src/cli). */
#ifndef FABULA_CLI_CLI_TOKENIZER_H
#define FABULA_CLI_CLI_TOKENIZER_H

int cli_tokenizer_train(int argc, char **argv);
int cli_tokenizer_encode(int argc, char **argv);

#endif
