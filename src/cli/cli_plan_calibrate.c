/* `fabula plan calibrate`: its options, then the measurement in
 * src/probe/calibrate.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/cli_plan.h"
#include "config/config.h"
#include "parallel/world.h"
#include "probe/calibrate.h"
#include "util/error.h"

static void calibrate_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula plan calibrate [options] [CONFIG.json ...]\n"
            "\n"
            "Measures data.attention_cost, the c of the sampler's cost len + c*len^2,\n"
            "for the config's model on its backend (run.backend: on a GPU with \"cuda\"):\n"
            "forward and backward over\n"
            "--tokens tokens packed as samples of --short tokens, then of --long\n"
            "tokens (default data.seq_len), the median of --repeats alternating runs each. Prints\n"
            "the measured c beside the FLOP-based \"auto\" value; put it in the config\n"
            "as data.attention_cost to plan with it.\n"
            "\n"
            "  --short N     short sample length (default 64)\n"
            "  --long N      long sample length (default data.seq_len)\n"
            "  --tokens N    tokens per measured pass (default: the long length x 2; with\n"
            "                --write-machine at least data.max_tokens_per_batch)\n"
            "  --repeats N   timed passes per length (default 5; one untimed first)\n"
            "  --set K=V     override a config key\n"
            "  --write-machine FILE  also measure this machine and write a machine file for\n"
            "                `fabula plan time` (docs/plan.md): the model's sustained FLOP/s\n"
            "                (linear layers and attention, from the two passes; a MoE model's\n"
            "                experts from passes paired with ones at capacity factor 0.5),\n"
            "                how far the slowest rank lags at synchronisations (sync_wait),\n"
            "                the sgemm FLOP/s through the ops table, AdamW's memory\n"
            "                bandwidth and, run under mpiexec -n N (N >= 2), the MPI\n"
            "                latency and bandwidth;\n"
            "                every rank measures at once, at train's thread count; prints\n"
            "                the long passes' spread (slowest - fastest over the median, how\n"
            "                far the machine's speed moved) and warns above 15%%\n"
            "  --name NAME   the machine file's name (default cpu-this, gpu-this on CUDA)\n"
            "  --data        tokens from the config's training data (data.corpus or\n"
            "                data.train), new samples for every pass and rank, instead of\n"
            "                random ids; with model.init_from (a pilot run's weights,\n"
            "                `fabula export`) the routing and capacity drops of training\n"
            "  --clock wall|cpu  time the model passes by the wall clock (default) or by\n"
            "                the process's CPU time (a machine shared with other jobs;\n"
            "                meant for one thread a rank)\n"
            "  -h, --help    this help\n"
            "\n"
            "exit codes: 0 ok, 1 internal, 2 usage or config, 3 data (--data), 4 I/O\n");
}

int cli_plan_calibrate(int argc, char **argv)
{
    enum { OPT_SHORT = 1, OPT_LONG, OPT_TOKENS, OPT_REPEATS, OPT_SET, OPT_MACHINE, OPT_NAME, OPT_CLOCK, OPT_DATA };
    static const cli_option_t options[] = {
        {"short", 0, 1, OPT_SHORT},   {"long", 0, 1, OPT_LONG}, {"tokens", 0, 1, OPT_TOKENS},
        {"repeats", 0, 1, OPT_REPEATS}, {"set", 0, 1, OPT_SET}, {"write-machine", 0, 1, OPT_MACHINE},
        {"name", 0, 1, OPT_NAME},     {"clock", 0, 1, OPT_CLOCK}, {"data", 0, 0, OPT_DATA}, {0, 0, 0, 0},
    };
    probe_calibrate_opts_t o = {.shortlen = 64, .repeats = 5};
    int nsets = 0, opt;
    char *command = probe_command_line(argc, argv);
    const char **sets = fb_calloc((size_t)argc + 1, sizeof *sets);
    cli_args_t args;
    cli_args_init(&args, "plan calibrate", calibrate_usage, options, 1, &argc, &argv);
    while ((opt = cli_args_next(&args)) != 0) {
        switch (opt) {
        case OPT_SHORT: o.shortlen = (int)cli_args_int(&args, 2, 1 << 20); break;
        case OPT_LONG: o.longlen = (int)cli_args_int(&args, 2, 1 << 20); break;
        case OPT_TOKENS: o.tokens = (int)cli_args_int(&args, 2, 1 << 24); break;
        case OPT_REPEATS: o.repeats = (int)cli_args_int(&args, 1, 1000); break;
        case OPT_SET: sets[nsets++] = args.value; break;
        case OPT_MACHINE: o.machine = args.value; break;
        case OPT_NAME: o.name = args.value; break;
        case OPT_DATA: o.use_data = 1; break;
        case OPT_CLOCK:
            if (strcmp(args.value, "wall") != 0 && strcmp(args.value, "cpu") != 0)
                cli_args_fail(&args, 0, "--clock '%s': expected wall or cpu", args.value);
            o.cpu_clock = strcmp(args.value, "cpu") == 0;
            break;
        }
    }
    if (o.name && (!*o.name || strlen(o.name) >= 128))
        cli_args_fail(&args, 0, "--name expects 1 to 127 characters");
    /* MPI first: a config error is then printed once, by rank 0 */
    parallel_init(&argc, &argv);
    config_t cfg;
    config_load(&cfg, (const char *const *)args.positional, args.npositional, (const char *const *)sets, nsets, 1,
                parallel_rank() == 0);
    char *config_name = fb_strdup(args.npositional ? args.positional[args.npositional - 1] : "the default config");
    o.config_name = config_name;
    o.command = command;
    free(sets);
    cli_args_free(&args);
    const int code = probe_calibrate(&cfg, &o);
    free(config_name);
    free(command);
    config_free(&cfg);
    parallel_finalize();
    return code;
}
