/* `fabula plan memory` (cli_plan.c dispatches to it). */
#ifndef FABULA_CLI_CLI_PLAN_MEMORY_H
#define FABULA_CLI_CLI_PLAN_MEMORY_H

int plan_memory_cmd(int argc, char **argv);

#endif
