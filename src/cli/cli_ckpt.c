/* `fabula ckpt info|verify FILE`: inspect a checkpoint without MPI. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
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
        fprintf(stderr, "fabula ckpt: unknown subcommand '%s'\n\n", what);
        ckpt_usage(stderr);
        return FB_EXIT_USAGE;
    }
    static const struct option longopts[] = {
        {"config", no_argument, 0, 'c'},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int print_config = 0, quiet = 0, opt;
    argc--;
    argv++;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+qh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            print_config = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            ckpt_usage(stdout);
            return FB_EXIT_OK;
        default:
            fprintf(stderr, "fabula ckpt %s: unknown option '%s'\n\n", what, argv[optind - 1]);
            ckpt_usage(stderr);
            return FB_EXIT_USAGE;
        }
    }
    if ((print_config && !is_info) || (quiet && !is_verify) || optind != argc - 1) {
        ckpt_usage(stderr);
        return FB_EXIT_USAGE;
    }
    const char *path = argv[optind];
    return is_info ? ckpt_info(path, print_config) : ckpt_verify(path, quiet);
}
