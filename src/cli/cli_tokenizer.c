/* `fabula tokenizer`: train (cli_tokenizer_train.c), encode
 * (cli_tokenizer_encode.c), info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "parallel/world.h"
#include "util/error.h"

static void tokenizer_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula tokenizer <command> [options]\n"
            "\n"
            "commands:\n"
            "  train     learn a byte-level BPE tokenizer from novels (MPI: ranks share the input)\n"
            "  encode    encode every novel of a file with a tokenizer; write the ids\n"
            "  info      print a tokenizer's kind, vocabulary size, digest and special tokens\n"
            "\n"
            "A tokenizer is \"bytes\" (built in), a fabula tokenizer file (from `train`)\n"
            "or a Hugging Face tokenizer.json of the byte-level BPE kind. See\n"
            "docs/tokenizer.md. `fabula tokenizer <command> --help` for options.\n");
}

static void info_usage(FILE *f)
{
    fprintf(f, "usage: fabula tokenizer info TOKENIZER\n\n"
               "Loads TOKENIZER (\"bytes\", a fabula tokenizer file or a tokenizer.json;\n"
               "a fabula file's digest is verified) and prints its kind, vocabulary size,\n"
               "digest and special tokens.\n");
}

static int cli_tokenizer_info(int argc, char **argv)
{
    static const cli_option_t options[] = {{0, 0, 0, 0}};
    cli_args_t a;
    cli_args_init(&a, "tokenizer info", info_usage, options, 0, &argc, &argv);
    while (cli_args_next(&a) != 0)
        ;
    if (a.npositional != 1)
        cli_args_fail(&a, 1, "expected one TOKENIZER, not %d arguments", a.npositional);
    const char *spec = a.positional[0];
    cli_args_free(&a);
    tokenizer_t *t = tokenizer_load(spec);
    printf("source: %s\nkind: %s\nvocab_size: %d\ndigest: %s\nspecial_tokens: %d\n", tokenizer_source(t),
           tokenizer_kind(t), tokenizer_vocab_size(t), tokenizer_digest(t), tokenizer_nspecial(t));
    for (int i = 0; i < tokenizer_nspecial(t); i++) {
        int32_t id;
        const char *text = tokenizer_special_at(t, i, &id);
        printf("  %d %s\n", (int)id, text);
    }
    tokenizer_free(t);
    return FB_EXIT_OK;
}

int cli_tokenizer(int argc, char **argv)
{
    if (argc < 2) {
        tokenizer_usage(stderr);
        return FB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        tokenizer_usage(stdout);
        return FB_EXIT_OK;
    }
    if (!strcmp(cmd, "train"))
        return cli_tokenizer_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "encode"))
        return cli_tokenizer_encode(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cli_tokenizer_info(argc - 1, argv + 1);
    static const char *const commands[] = {"train", "encode", "info"};
    char msg[256];
    fprintf(stderr, "fabula tokenizer: %s\n\n", cli_unknown_word("command", cmd, commands, 3, msg, sizeof msg));
    tokenizer_usage(stderr);
    return FB_EXIT_USAGE;
}
