/* `fabula plan time` (cli_plan.c dispatches to it) and what the plan
 * subcommands share. */
#ifndef FABULA_CLI_CLI_PLAN_H
#define FABULA_CLI_CLI_PLAN_H

#include <stdint.h>

int plan_time_main(int argc, char **argv);

/* Sample lengths for the step plan, as `plan sampler` reads them: from
 * novels (`jsonl`, split "windows" or "chapters", byte tokenizer) or a
 * lengths file (one integer a line), cut to max_seq_len (*cut counts
 * those). Fatal errors on bad input; *lens is the caller's to free. */
int64_t cli_plan_lengths(const char *jsonl, const char *lengths_file, const char *split, int max_seq_len,
                         int64_t **lens, int64_t *cut);

/* dp x tp x pp of a layout spec ("world=W" when given), the world the
 * config is validated for before the spec is parsed over it (a malformed
 * part gives 1 here and its message from plan_layout_parse). */
int cli_plan_spec_world(const char *spec);

#endif
