/* `fabula eval`: the validation loss of a checkpoint, offline
 * (train/eval_checkpoint.h). The checkpoint's own effective config gives
 * the model, the data and the tokenizer; this job's world gives the layout. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "config/config.h"
#include "parallel/world.h"
#include "train/eval_checkpoint.h"
#include "train/train_config.h"
#include "util/error.h"

static void eval_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula eval --checkpoint CKPT [--corpus C.h5] [--split val|train] [--samples N]\n"
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
            "  -h, --help         this help\n"
            "\n"
            "Prints a Markdown table: genre, samples, target tokens, loss (nats), ppl.\n"
            "exit codes: 0 ok, 2 usage (also: no validation split), 3 not a checkpoint or\n"
            "damaged, or a corpus that does not fit it, 4 cannot read a file\n");
}

/* The checkpoint's config for this job: the batch triple re-derived for
 * this world (the training's may not divide it) and the expert-parallel
 * size kept only where it divides the world. Written to a temporary file
 * for config_load, which reads files; the file is unlinked at once and read
 * through /dev/fd, so that no exit leaves it behind. *fd: close it after. */
static char *eval_config_file(const char *json_text, const char *ckpt, int world, int *fd_out)
{
    json_error_t err;
    json_t *root = json_loads(json_text, 0, &err);
    if (!root || !json_is_object(root))
        fb_fatal_all(FB_EXIT_DATA, "checkpoint %s: its config is not a JSON object: %s", ckpt, err.text);
    json_object_del(root, "train_batch_size");
    json_object_set_new(root, "gradient_accumulation_steps", json_integer(1));
    json_t *par = json_object_get(root, "parallel");
    json_t *ep = par ? json_object_get(par, "expert_parallel_size") : NULL;
    if (ep && json_is_integer(ep) && (json_integer_value(ep) < 1 || world % json_integer_value(ep) != 0))
        json_object_set_new(par, "expert_parallel_size", json_integer(1));
    const char *tmp = getenv("TMPDIR");
    size_t n = strlen(tmp && tmp[0] ? tmp : "/tmp") + 40;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/fabula-eval-XXXXXX.json", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemps(path, 5);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "cannot create a temporary file %s: %s", path, strerror(errno));
    if (unlink(path) != 0 || json_dumpfd(root, fd, JSON_INDENT(1)) != 0)
        fb_fatal(FB_EXIT_IO, "cannot write the temporary file %s: %s", path, strerror(errno));
    json_decref(root);
    snprintf(path, n, "/dev/fd/%d", fd);
    *fd_out = fd;
    return path;
}

int cli_eval(int argc, char **argv)
{
    enum { OPT_CKPT = 1, OPT_CORPUS, OPT_SPLIT, OPT_SAMPLES };
    static const cli_option_t options[] = {{"checkpoint", 0, 1, OPT_CKPT},
                                           {"corpus", 0, 1, OPT_CORPUS},
                                           {"split", 0, 1, OPT_SPLIT},
                                           {"samples", 0, 1, OPT_SAMPLES},
                                           {0, 0, 0, 0}};
    const char *ckpt = NULL, *corpus = NULL;
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
        }
    }
    if (!ckpt)
        cli_args_fail(&a, 1, "--checkpoint CKPT is required");
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);

    parallel_init(&argc, &argv);
    char *json_text = NULL, why[512] = "";
    long step = 0;
    int code = ckpt_read_config(ckpt, &json_text, &step, why, sizeof why);
    if (code != FB_EXIT_OK)
        fb_fatal_all(code, "--checkpoint %s: %s", ckpt, why);
    int fd;
    char *path = eval_config_file(json_text, ckpt, parallel_size(), &fd);
    free(json_text);
    char set_corpus[4096], set_samples[64];
    const char *sets[2];
    int nsets = 0;
    if (corpus) {
        snprintf(set_corpus, sizeof set_corpus, "data.corpus=%s", corpus);
        sets[nsets++] = set_corpus;
    }
    if (samples > 0) {
        snprintf(set_samples, sizeof set_samples, "run.eval_samples=%lld", samples);
        sets[nsets++] = set_samples;
    }
    config_t cfg;
    const char *paths[1] = {path};
    config_load(&cfg, paths, 1, sets, nsets, parallel_size(), parallel_rank() == 0);
    close(fd);
    free(path);
    train_config_resolve(&cfg, 0);
    code = eval_checkpoint(&cfg, ckpt, step, valid, cfg.run.eval_samples);
    config_free(&cfg);
    cli_args_free(&a);
    parallel_finalize();
    return code;
}
