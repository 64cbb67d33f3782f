/* `fabula eval`: its options, then one of the jobs of train/eval_run.h (a
 * checkpoint's validation loss, offline; a directory's; one sequence's
 * logits). The checkpoint's own effective config gives the model, the data
 * and the tokenizer; this job's world gives the layout. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "parallel/world.h"
#include "train/eval_run.h"
#include "io/regular_file.h"
#include "util/error.h"

static void eval_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula eval --checkpoint CKPT [--corpus C.h5] [--split val|train] [--samples N]\n"
            "       fabula eval --model DIR --corpus C.h5 --tokenizer T [--split val|train] [--samples N]\n"
            "       fabula eval (--checkpoint CKPT | --model DIR) --tokens IDS --logits-out FILE.npy\n"
            "\n"
            "The LM loss and perplexity of a checkpoint on the first N samples of a\n"
            "split, overall and per genre, as the training's run.eval_interval measures\n"
            "it: on the same checkpoint the same digits (CPU backend, same rank count).\n"
            "Runs on any number of ranks (mpiexec -n R); the model, tokenizer and corpus\n"
            "are the checkpoint's own config's.\n"
            "\n"
            "options:\n"
            "  --checkpoint CKPT  a checkpoint file (RUN_DIR/checkpoints/step-N.h5)\n"
            "  --corpus C.h5      another corpus (made by `fabula prep` with the same\n"
            "                     tokenizer) instead of the config's data.corpus\n"
            "  --split val|train  the held-out novels (`prep --valid-fraction`; default)\n"
            "                     or the training samples\n"
            "  --samples N        the first N samples (default: the config's\n"
            "                     run.eval_samples, as in training)\n"
            "  --model DIR        a transformers save_pretrained directory (Llama,\n"
            "                     Mixtral) instead of a checkpoint (docs/init-from.md)\n"
            "  --tokenizer T      with --model: the tokenizer the corpus was prepared with\n"
            "  --tokens IDS       one sequence of token ids: a comma list (1,2,3) or\n"
            "                     @FILE, a file of ids separated by commas or white space\n"
            "  --logits-out F.npy with --tokens: write the fp32 logits [T, vocab] of the\n"
            "                     sequence (positions 0..T-1) as a NumPy .npy (<f4) file,\n"
            "                     dropless as generate and the export compute them (a\n"
            "                     MoE's capacity_factor drops in training only); one rank\n"
            "  -h, --help         this help\n"
            "\n"
            "Prints a Markdown table: genre, samples, target tokens, loss (nats), ppl.\n"
            "exit codes: 0 ok, 2 usage (also: no validation split), 3 not a checkpoint or\n"
            "damaged, or a corpus that does not fit it, 4 cannot read a file\n");
}

/* The ids of --tokens: "1,2,3", or "@FILE" holding ids separated by commas
 * or white space. */
static int32_t *parse_ids(const char *spec, int *T)
{
    char *text;
    if (spec[0] == '@') {
        FILE *f;
        char why[1024];
        int code = regular_file_fopen(spec + 1, &f, why, sizeof why);
        if (code == FB_EXIT_IO)
            fb_fatal(FB_EXIT_IO, "--tokens %s: cannot read: %s", spec, strerror(errno));
        if (code)
            fb_fatal(code, "--tokens %s", why);
        size_t n = 0, cap = 4096;
        text = fb_malloc(cap + 1);
        size_t got;
        while ((got = fread(text + n, 1, cap - n, f)) > 0)
            if ((n += got) == cap)
                text = fb_realloc(text, (cap *= 2) + 1);
        if (ferror(f))
            fb_fatal(FB_EXIT_IO, "--tokens %s: cannot read: %s", spec, strerror(errno));
        fclose(f);
        text[n] = '\0';
    } else {
        text = fb_strdup(spec);
    }
    int32_t *ids = NULL;
    int n = 0, cap = 0;
    for (char *p = text;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !strchr(", \t\r\n", *end)))
            fb_fatal(FB_EXIT_USAGE, "--tokens %s: expected non-negative integer ids separated by commas (or "
                     "white space in a file), at \"%.20s\"", spec[0] == '@' ? spec : "", p);
        if (n == cap)
            ids = fb_realloc(ids, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *ids);
        ids[n++] = (int32_t)v;
        p = end;
    }
    free(text);
    if (n == 0)
        fb_fatal(FB_EXIT_USAGE, "--tokens %s: no ids", spec);
    *T = n;
    return ids;
}

int cli_eval(int argc, char **argv)
{
    enum { OPT_CKPT = 1, OPT_CORPUS, OPT_SPLIT, OPT_SAMPLES, OPT_MODEL, OPT_TOKENIZER, OPT_TOKENS, OPT_LOGITS };
    static const cli_option_t options[] = {{"checkpoint", 0, 1, OPT_CKPT},
                                           {"model", 0, 1, OPT_MODEL},
                                           {"tokenizer", 0, 1, OPT_TOKENIZER},
                                           {"tokens", 0, 1, OPT_TOKENS},
                                           {"logits-out", 0, 1, OPT_LOGITS},
                                           {"corpus", 0, 1, OPT_CORPUS},
                                           {"split", 0, 1, OPT_SPLIT},
                                           {"samples", 0, 1, OPT_SAMPLES},
                                           {0, 0, 0, 0}};
    const char *ckpt = NULL, *corpus = NULL, *model = NULL, *tokenizer = NULL, *tokens = NULL, *logits = NULL;
    int valid = 1, id;
    long long samples = 0;
    cli_args_t a;
    cli_args_init(&a, "eval", eval_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_CKPT:
            ckpt = a.value;
            break;
        case OPT_CORPUS:
            corpus = a.value;
            break;
        case OPT_SPLIT:
            if (!strcmp(a.value, "val") || !strcmp(a.value, "valid"))
                valid = 1;
            else if (!strcmp(a.value, "train"))
                valid = 0;
            else
                cli_args_fail(&a, 0, "--split '%s': expected val or train", a.value);
            break;
        case OPT_SAMPLES:
            samples = cli_args_int(&a, 1, 1LL << 40);
            break;
        case OPT_MODEL:
            model = a.value;
            break;
        case OPT_TOKENIZER:
            tokenizer = a.value;
            break;
        case OPT_TOKENS:
            tokens = a.value;
            break;
        case OPT_LOGITS:
            logits = a.value;
            break;
        }
    }
    if (!ckpt && !model)
        cli_args_fail(&a, 1, "--checkpoint CKPT is required (or --model DIR)");
    if (ckpt && model)
        cli_args_fail(&a, 1, "give one of --checkpoint CKPT and --model DIR, not both");
    if (!tokens != !logits)
        cli_args_fail(&a, 1, "--tokens IDS and --logits-out FILE go together");
    if (tokens && (corpus || tokenizer || samples))
        cli_args_fail(&a, 1, "--tokens computes logits of one sequence: no --corpus, --tokenizer or --samples");
    if (model && !tokens && (!corpus || !tokenizer))
        cli_args_fail(&a, 1, "--model DIR evaluates on --corpus C.h5 made with --tokenizer T (both required)");
    if (tokenizer && !model)
        cli_args_fail(&a, 1, "--tokenizer goes with --model (a checkpoint names its own)");
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);

    parallel_init(&argc, &argv);
    if (tokens) {
        int T;
        int32_t *ids = parse_ids(tokens, &T);
        int rc = eval_run_logits(ckpt, model, ids, T, logits);
        free(ids);
        cli_args_free(&a);
        parallel_finalize();
        return rc;
    }
    if (model) {
        int rc = eval_run_model(model, corpus, tokenizer, valid, samples);
        cli_args_free(&a);
        parallel_finalize();
        return rc;
    }
    int code = eval_run_checkpoint(ckpt, corpus, samples, valid);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
