/* The subcommands of `fabula plan`: cli_plan.c dispatches to each, and
 * each parses its options and calls its room (src/plan, src/probe). */
#ifndef FABULA_CLI_CLI_PLAN_H
#define FABULA_CLI_CLI_PLAN_H

int cli_plan_sampler(int argc, char **argv);
int cli_plan_calibrate(int argc, char **argv);
int cli_plan_memory(int argc, char **argv);
int cli_plan_time(int argc, char **argv);
int cli_plan_layout(int argc, char **argv);

#endif
