/* fabula: one binary, one subcommand per job. Runs under mpiexec/srun. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "util/error.h"
#include "util/test_defect.h"

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula <command> [options]\n"
            "\n"
            "MPI-native trainer for mixture-of-experts language models on novels.\n"
            "Run under mpiexec or srun; every rank runs the same command.\n"
            "\n"
            "commands:\n"
            "  train     train a model from a JSON run config (DeepSpeed keys accepted);\n"
            "            --dry-run checks the whole job first\n"
            "  tokenizer train, apply or inspect a tokenizer: train (byte-level BPE), encode, info\n"
            "  prep      tokenize novels (.json/.jsonl) into a corpus file (parallel HDF5)\n"
            "  plan      the planner, without running a job: memory (a layout's bytes a rank),\n"
            "            time (a step on a machine file), layout (the fastest that fits N GPUs),\n"
            "            sampler (the step plan on N simulated ranks), calibrate (this\n"
            "            machine's attention cost and, --write-machine, its machine file)\n"
            "  ckpt      inspect a checkpoint: `ckpt info FILE`, `ckpt verify FILE`\n"
            "  eval      the validation loss and perplexity per genre of a checkpoint or a\n"
            "            Hugging Face directory; one sequence's logits (--logits-out)\n"
            "  export    a checkpoint as a Hugging Face model directory (safetensors, tokenizer)\n"
            "  generate  continue a prompt with a checkpoint's or a Hugging Face directory's\n"
            "            model (KV cache, sampling)\n"
            "  report    a run directory as HTML + Markdown; --compare runs; --scaling table\n"
            "  validate  train the reference job and compare its losses with the committed curves\n"
            "\n"
            "options:\n"
            "  -h, --help     this help; `fabula <command> --help` for a command's options\n"
            "  --version      version and the libraries this build uses\n"
            "\n"
            "exit codes: 0 ok, 1 internal error, 2 usage or config, 3 input data,\n"
            "            4 I/O, 5 diverged (NaN/Inf), 6 validation failed,\n"
            "            75 preempted after a checkpoint, 76 a step hung (RUN_DIR/hang.txt)\n");
}

int main(int argc, char **argv)
{
    /* before any command, so that a misspelled defect fails every command
     * alike and a test's run says that it trains the wrong thing */
    fb_test_defect_check();
    if (argc < 2) {
        print_usage(stderr);
        return FB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        print_usage(stdout);
        return FB_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        cli_print_version();
        return FB_EXIT_OK;
    }
    if (!strcmp(cmd, "train"))
        return cli_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenizer"))
        return cli_tokenizer(argc - 1, argv + 1);
    if (!strcmp(cmd, "prep"))
        return cli_prep(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan"))
        return cli_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "ckpt"))
        return cli_ckpt(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval"))
        return cli_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "export"))
        return cli_export(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return cli_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "report"))
        return cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate"))
        return cli_validate(argc - 1, argv + 1);
    static const char *const commands[] = {"train", "tokenizer", "prep",   "plan",     "ckpt",    "eval",
                                           "export", "generate", "report", "validate", "version"};
    char msg[256];
    fprintf(stderr, "fabula: error: %s\n\n",
            cli_unknown_word("command", cmd, commands, sizeof commands / sizeof *commands, msg, sizeof msg));
    print_usage(stderr);
    return FB_EXIT_USAGE;
}
