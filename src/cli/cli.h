/* Subcommands of the `fabula` binary. Each parses its own options, prints
 * its own --help, and returns the process exit code. */
#ifndef FABULA_CLI_CLI_H
#define FABULA_CLI_CLI_H

int cli_train(int argc, char **argv);
int cli_tokenizer(int argc, char **argv);
/* `fabula prep`: novels to a corpus HDF5 file (docs/prep.md). */
int cli_prep(int argc, char **argv);
/* `fabula plan sampler`: the sampler and packer simulated on a corpus. */
int cli_plan(int argc, char **argv);
/* `fabula ckpt info|verify FILE`: a checkpoint's metadata, tensors, checksums. */
int cli_ckpt(int argc, char **argv);

/* `fabula eval --checkpoint CKPT`: a checkpoint's validation loss per genre. */
int cli_eval(int argc, char **argv);
/* `fabula export --checkpoint CKPT --output DIR`: a Hugging Face model directory. */
int cli_export(int argc, char **argv);
/* `fabula generate --checkpoint CKPT`: text from a model, KV-cached (docs/generate.md). */
int cli_generate(int argc, char **argv);
/* `fabula report`: a run directory's report, runs compared, a scaling table. */
int cli_report(int argc, char **argv);
/* `fabula validate`: the reference job against the committed loss curves. */
int cli_validate(int argc, char **argv);

/* "fabula 0.1.0 (MPI ..., HDF5 ..., CUDA ...)" on stdout. */
void cli_print_version(void);

#endif
