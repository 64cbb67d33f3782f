/* `fabula plan layout` (cli_plan.c dispatches to it). */
#ifndef FABULA_CLI_CLI_PLAN_LAYOUT_H
#define FABULA_CLI_CLI_PLAN_LAYOUT_H

int plan_layout(int argc, char **argv);

#endif
