/* Subcommands of the `fabula` binary. Each parses its own options, prints
 * its own --help, and returns the process exit code. */
#ifndef FABULA_CLI_CLI_H
#define FABULA_CLI_CLI_H

int cli_train(int argc, char **argv);

/* "fabula 0.1.0 (MPI ..., HDF5 ..., CUDA ...)" on stdout. */
void cli_print_version(void);

#endif
