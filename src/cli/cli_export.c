/* `fabula export`: a checkpoint as a Hugging Face model directory
 * (src/hf/hf_export.h, docs/export.md). Serial; under mpiexec rank 0 does
 * the work and the others wait for its outcome. */
#include <ctype.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "hf/hf_export.h"
#include "parallel/world.h"
#include "util/error.h"

static void export_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula export --checkpoint CKPT --output DIR [options]\n"
            "\n"
            "Writes CKPT as a directory transformers loads unchanged with\n"
            "AutoModelForCausalLM.from_pretrained(DIR) and AutoTokenizer.from_pretrained(DIR):\n"
            "config.json (LlamaForCausalLM for a dense model, MixtralForCausalLM for MoE),\n"
            "generation_config.json, model.safetensors (or model-0000i-of-0000N.safetensors\n"
            "and model.safetensors.index.json), tokenizer.json, tokenizer_config.json,\n"
            "special_tokens_map.json. Any ZeRO stage or ep size wrote CKPT: the output is\n"
            "the same bytes. One process reads it tensor by tensor (under mpiexec, rank 0).\n"
            "\n"
            "An MoE trained with expert capacity (model.capacity_factor > 0: the default\n"
            "model's 1.25) is exported only with --allow-dropless-inference: transformers'\n"
            "Mixtral, like `fabula generate`, routes every token to its experts, where\n"
            "training dropped the assignments over an expert's capacity.\n"
            "\n"
            "options:\n"
            "  --checkpoint CKPT     a checkpoint file (RUN_DIR/checkpoints/step-N.h5)\n"
            "  --output DIR          the directory to write (created)\n"
            "  --dtype D             fp32 (default), bf16 or fp16: round to nearest even\n"
            "  --max-shard-size S    shard above S bytes of tensors: 5GB (default), 500MB,\n"
            "                        10MiB, 123 (bytes); units KB MB GB TB (1000s), KiB MiB\n"
            "                        GiB TiB (1024s)\n"
            "  --tokenizer T         the checkpoint's tokenizer from another place (its saved\n"
            "                        data.tokenizer moved): the vocabulary the model was\n"
            "                        trained with, else exit 3\n"
            "  --force               DIR may exist: its exported files are replaced\n"
            "  --allow-dropless-inference\n"
            "                        export a model trained with capacity_factor > 0 (the\n"
            "                        default MoE) as the dropless Mixtral (which differs from\n"
            "                        the training's forward where an expert overflows)\n"
            "  -q, --quiet           no progress on stderr\n"
            "  -h, --help            this help\n"
            "\n"
            "exit codes: 0 ok, 2 usage (a bad option, DIR exists, a model Llama/Mixtral cannot\n"
            "            compute), 3 not a checkpoint or damaged, a bad tokenizer, 4 I/O\n");
}

/* "5GB", "500MB", "10MiB", "123": bytes; 0 when malformed. */
static unsigned long long parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0))
        return 0;
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},         {"B", 1},          {"KB", 1e3},       {"MB", 1e6},         {"GB", 1e9},
                 {"TB", 1e12},    {"KIB", 1024.0},   {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
    char u[8] = {0};
    size_t n = strlen(end);
    if (n >= sizeof u)
        return 0;
    for (size_t i = 0; i < n; i++)
        u[i] = (char)toupper((unsigned char)end[i]);
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (!strcmp(u, units[i].unit)) {
            double b = v * units[i].mult;
            return b >= 1 && b < 1.8e19 ? (unsigned long long)b : 0;
        }
    return 0;
}

static void run_export(void *arg)
{
    const hf_export_opts_t *o = arg;
    if (o->tokenizer)
        hf_export_check_tokenizer(o);
    hf_export(o);
}

int cli_export(int argc, char **argv)
{
    enum { OPT_CKPT = 1, OPT_OUT, OPT_DTYPE, OPT_SHARD, OPT_TOK, OPT_FORCE, OPT_DROPLESS, OPT_QUIET };
    static const cli_option_t options[] = {{"checkpoint", 0, 1, OPT_CKPT},
                                           {"output", 0, 1, OPT_OUT},
                                           {"dtype", 0, 1, OPT_DTYPE},
                                           {"max-shard-size", 0, 1, OPT_SHARD},
                                           {"tokenizer", 0, 1, OPT_TOK},
                                           {"force", 0, 0, OPT_FORCE},
                                           {"allow-dropless-inference", 0, 0, OPT_DROPLESS},
                                           {"quiet", 'q', 0, OPT_QUIET},
                                           {0, 0, 0, 0}};
    hf_export_opts_t o = {.dtype = HF_DTYPE_F32, .max_shard_bytes = 5000000000ULL};
    int id;
    cli_args_t a;
    cli_args_init(&a, "export", export_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_CKPT:
            o.checkpoint = a.value;
            break;
        case OPT_OUT:
            o.output = a.value;
            break;
        case OPT_DTYPE:
            if (!strcmp(a.value, "fp32") || !strcmp(a.value, "float32"))
                o.dtype = HF_DTYPE_F32;
            else if (!strcmp(a.value, "bf16") || !strcmp(a.value, "bfloat16"))
                o.dtype = HF_DTYPE_BF16;
            else if (!strcmp(a.value, "fp16") || !strcmp(a.value, "float16"))
                o.dtype = HF_DTYPE_F16;
            else
                cli_args_fail(&a, 0, "--dtype '%s': expected fp32, bf16 or fp16", a.value);
            break;
        case OPT_SHARD:
            o.max_shard_bytes = parse_size(a.value);
            if (!o.max_shard_bytes)
                cli_args_fail(&a, 0, "--max-shard-size '%s': expected a positive size such as 5GB, 500MB, 10MiB or 123",
                              a.value);
            break;
        case OPT_TOK:
            o.tokenizer = a.value;
            break;
        case OPT_FORCE:
            o.force = 1;
            break;
        case OPT_DROPLESS:
            o.allow_dropless = 1;
            break;
        case OPT_QUIET:
            o.quiet = 1;
            break;
        }
    }
    if (!o.checkpoint)
        cli_args_fail(&a, 1, "--checkpoint CKPT is required");
    if (!o.output)
        cli_args_fail(&a, 1, "--output DIR is required");
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);

    parallel_init(&argc, &argv);
    /* One thread: the export waits on reads and writes, and OpenMP workers
     * left spinning after each tensor's checksum take the CPU those writes
     * need (908 MB on 2 cores: 14.0 s wall with 2 threads, 9.2 s with 1). */
    omp_set_num_threads(1);
    char msg[2048] = "";
    int code = 0;
    if (parallel_rank() == 0) {
        code = fb_catch(run_export, &o, msg, sizeof msg);
        if (code)
            hf_export_abandon();
    }
    /* the other ranks wait here for rank 0's outcome, printed once */
    parallel_agree_outcome(code, msg);
    cli_args_free(&a);
    parallel_finalize();
    return FB_EXIT_OK;
}
