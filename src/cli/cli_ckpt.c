/* `fabula ckpt info|verify FILE`: inspect a checkpoint without MPI. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "ckpt/ckpt.h"
#include "util/error.h"

static void ckpt_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula ckpt info [--config] FILE\n"
            "       fabula ckpt verify [-q] FILE\n"
            "\n"
            "Inspects a checkpoint written by `fabula train` (docs/checkpoint.md); one\n"
            "process, no mpiexec needed.\n"
            "\n"
            "  info      the metadata (step, layout, scheduler, loss scaler, RNG, data\n"
            "            position) and the tensor table: name, shape, checksum, file offset\n"
            "            --config  also print the effective config saved in it\n"
            "  verify    read every tensor and recompute its checksum; one line per tensor\n"
            "            (-q: only the damaged ones) and a summary\n"
            "\n"
            "exit codes: 0 ok, 2 usage, 3 damaged or not a checkpoint, 4 cannot read the file\n");
}

int cli_ckpt(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        ckpt_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? FB_EXIT_USAGE : FB_EXIT_OK;
    }
    const char *what = argv[1];
    int is_info = !strcmp(what, "info"), is_verify = !strcmp(what, "verify");
    if (!is_info && !is_verify) {
        static const char *const subcommands[] = {"info", "verify"};
        char msg[256];
        fprintf(stderr, "fabula ckpt: %s\n\n", cli_unknown_word("subcommand", what, subcommands, 2, msg, sizeof msg));
        ckpt_usage(stderr);
        return FB_EXIT_USAGE;
    }
    enum { OPT_CONFIG = 1, OPT_QUIET };
    static const cli_option_t info_options[] = {{"config", 0, 0, OPT_CONFIG}, {0, 0, 0, 0}};
    static const cli_option_t verify_options[] = {{"quiet", 'q', 0, OPT_QUIET}, {0, 0, 0, 0}};
    int print_config = 0, quiet = 0, id;
    argc--;
    argv++;
    cli_args_t a;
    cli_args_init(&a, is_info ? "ckpt info" : "ckpt verify", ckpt_usage, is_info ? info_options : verify_options, 0,
                  &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        if (id == OPT_CONFIG)
            print_config = 1;
        else
            quiet = 1;
    }
    if (a.npositional != 1)
        cli_args_fail(&a, 1, "expected one checkpoint FILE, not %d arguments", a.npositional);
    const char *path = a.positional[0];
    cli_args_free(&a);
    return is_info ? ckpt_info(path, print_config) : ckpt_verify(path, quiet);
}
