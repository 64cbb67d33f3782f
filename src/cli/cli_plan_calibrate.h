/* `fabula plan calibrate` (cli_plan.c dispatches to it). */
#ifndef FABULA_CLI_CLI_PLAN_CALIBRATE_H
#define FABULA_CLI_CLI_PLAN_CALIBRATE_H

int plan_calibrate(int argc, char **argv);

#endif
