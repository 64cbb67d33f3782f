/* `fabula generate`: text from a trained model with a KV cache
 * (docs/generate.md): its options, then the model from infer_model_open
 * and the loop of src/infer/generate.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/infer_model.h"
#include "parallel/world.h"
#include "train/trainer.h"
#include "io/regular_file.h"
#include "util/error.h"

static void generate_usage(FILE *f)
{
    fprintf(f,
            "usage: fabula generate (--checkpoint CKPT | --model DIR) [--prompt TEXT | --prompt-file F] [--genre NAME]\n"
            "                       [--max-new-tokens N] [--temperature T [--top-k K] [--top-p P] [--seed S]]\n"
            "                       [--repetition-penalty R] [--num-samples N] [--stop-at eos|chapter|none]\n"
            "                       [--tokenizer T] [--ids-out FILE]\n"
            "\n"
            "Continues a prompt with a trained model on the CPU, one token at a time\n"
            "with a KV cache, and streams the text to stdout as it is produced (valid\n"
            "UTF-8; a newline after each sample). Speed (tokens/s of the prefill and of\n"
            "the decoding) goes to stderr. One process only.\n"
            "\n"
            "options:\n"
            "  --checkpoint CKPT         a checkpoint file (RUN_DIR/checkpoints/step-N.h5)\n"
            "  --model DIR               a Hugging Face model directory (`fabula export`'s,\n"
            "                            or a transformers save_pretrained Llama/Mixtral)\n"
            "                            with its tokenizer.json\n"
            "  --prompt TEXT             the text to continue (bytes as given)\n"
            "  --prompt-file F           the same from a file\n"
            "  --genre NAME              put the genre token first, as every training\n"
            "                            window starts (fantasy, romance, urban, scifi,\n"
            "                            historical, wuxia, mystery, other, unknown)\n"
            "  --max-new-tokens N        tokens to generate per sample (default 128)\n"
            "  --temperature T           sample at temperature T > 0 (default 0: greedy)\n"
            "  --top-k K                 sample from the K most likely tokens only\n"
            "  --top-p P                 nucleus sampling, P in (0, 1]\n"
            "  --seed S                  the draws' seed (default 0): the same seed gives\n"
            "                            the same samples whatever the thread count\n"
            "  --repetition-penalty R    divide positive (multiply negative) logits of\n"
            "                            tokens already in prompt or output by R > 0\n"
            "  --num-samples N           continuations of the same prompt (default 1)\n"
            "  --stop-at eos|chapter|none  stop a sample at <|eos|> (default), at <|eos|>\n"
            "                            or <|chapter_sep|>, or only after N tokens\n"
            "  --tokenizer T             the checkpoint's (or DIR's) tokenizer from another\n"
            "                            place (e.g. when that file moved); with --checkpoint\n"
            "                            it must have the vocabulary the model was trained\n"
            "                            with (else exit 3)\n"
            "  --ids-out FILE            the generated ids, one line per sample\n"
            "  -h, --help                this help\n"
            "\n"
            "exit codes: 0 ok, 2 usage, 3 not a checkpoint or damaged, or a tokenizer\n"
            "other than the one it was trained with, 4 cannot read or write a file\n");
}

static uint8_t *read_prompt_file(const char *path, size_t *len)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "--prompt-file %s: cannot open: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "--prompt-file %s", why);
    size_t cap = 4096, n = 0;
    uint8_t *b = fb_malloc(cap);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(b, cap);
            if (!nb)
                fb_fatal(FB_EXIT_INTERNAL, "out of memory reading %s", path);
            b = nb;
        }
    }
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "--prompt-file %s: cannot read: %s", path, strerror(errno));
    fclose(f);
    *len = n;
    return b;
}

int cli_generate(int argc, char **argv)
{
    enum {
        OPT_CKPT = 1, OPT_PROMPT, OPT_PROMPT_FILE, OPT_GENRE, OPT_MAX_NEW, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_SEED,
        OPT_REP, OPT_SAMPLES, OPT_STOP, OPT_TOK, OPT_IDS, OPT_MODEL
    };
    static const cli_option_t options[] = {
        {"checkpoint", 0, 1, OPT_CKPT},      {"model", 0, 1, OPT_MODEL},
        {"prompt", 0, 1, OPT_PROMPT},
        {"prompt-file", 0, 1, OPT_PROMPT_FILE}, {"genre", 0, 1, OPT_GENRE},
        {"max-new-tokens", 0, 1, OPT_MAX_NEW}, {"temperature", 0, 1, OPT_TEMP},
        {"top-k", 0, 1, OPT_TOPK},           {"top-p", 0, 1, OPT_TOPP},
        {"seed", 0, 1, OPT_SEED},            {"repetition-penalty", 0, 1, OPT_REP},
        {"num-samples", 0, 1, OPT_SAMPLES},  {"stop-at", 0, 1, OPT_STOP},
        {"tokenizer", 0, 1, OPT_TOK},        {"ids-out", 0, 1, OPT_IDS},
        {0, 0, 0, 0}};
    const char *ckpt = NULL, *model_dir = NULL, *prompt = NULL, *prompt_file = NULL, *genre = NULL, *tokenizer = NULL, *ids_path = NULL;
    const char *sampling_only = NULL;
    sample_params_t sp = {0.0, 0, 1.0, 1.0};
    long long max_new = 128, seed = 0, samples = 1;
    int stop_chapter = 0, id;
    cli_args_t a;
    cli_args_init(&a, "generate", generate_usage, options, 1, &argc, &argv);
    while ((id = cli_args_next(&a)) != 0) {
        switch (id) {
        case OPT_CKPT: ckpt = a.value; break;
        case OPT_MODEL: model_dir = a.value; break;
        case OPT_PROMPT: prompt = a.value; break;
        case OPT_PROMPT_FILE: prompt_file = a.value; break;
        case OPT_GENRE: genre = a.value; break;
        case OPT_TOK: tokenizer = a.value; break;
        case OPT_IDS: ids_path = a.value; break;
        case OPT_MAX_NEW: max_new = cli_args_int(&a, 1, 1 << 24); break;
        case OPT_SAMPLES: samples = cli_args_int(&a, 1, 1 << 20); break;
        case OPT_TEMP: sp.temperature = cli_args_real(&a, 0.0, 1e6, 0); break;
        case OPT_TOPK:
            sp.top_k = (int)cli_args_int(&a, 1, 1 << 30);
            sampling_only = "--top-k";
            break;
        case OPT_TOPP:
            sp.top_p = cli_args_real(&a, 0.0, 1.0, 0);
            if (sp.top_p <= 0.0)
                cli_args_fail(&a, 0, "--top-p %s: expected a number in (0, 1]", a.value);
            sampling_only = "--top-p";
            break;
        case OPT_SEED:
            seed = cli_args_int(&a, 0, (1LL << 62));
            sampling_only = "--seed";
            break;
        case OPT_REP:
            sp.repetition_penalty = cli_args_real(&a, 0.0, 1e6, 0);
            if (sp.repetition_penalty <= 0.0)
                cli_args_fail(&a, 0, "--repetition-penalty %s: expected a number > 0", a.value);
            break;
        case OPT_STOP:
            if (!strcmp(a.value, "eos"))
                stop_chapter = 0;
            else if (!strcmp(a.value, "chapter"))
                stop_chapter = 1;
            else if (!strcmp(a.value, "none"))
                stop_chapter = -1;
            else
                cli_args_fail(&a, 0, "--stop-at '%s': expected eos, chapter or none", a.value);
            break;
        }
    }
    if (!ckpt == !model_dir)
        cli_args_fail(&a, 1, "give one of --checkpoint CKPT and --model DIR");
    if (a.npositional)
        cli_args_fail(&a, 1, "unexpected argument '%s'", a.positional[0]);
    if (prompt && prompt_file)
        cli_args_fail(&a, 0, "--prompt and --prompt-file: give one of them");
    if (sampling_only && sp.temperature <= 0.0)
        cli_args_fail(&a, 0, "%s applies to sampling only: give --temperature T > 0 (the default is greedy)",
                      sampling_only);

    parallel_init(&argc, &argv);
    if (parallel_size() > 1)
        fb_fatal_all(FB_EXIT_USAGE, "fabula generate runs on one process, not %d: start it without mpiexec",
                     parallel_size());
    size_t plen = 0;
    uint8_t *ptext = NULL;
    if (prompt_file)
        ptext = read_prompt_file(prompt_file, &plen);
    else if (prompt) {
        plen = strlen(prompt);
        ptext = (uint8_t *)fb_strdup(prompt);
    }
    if (plen == 0 && !genre)
        fb_fatal(FB_EXIT_USAGE, "nothing to continue: the prompt is empty and no --genre was given");
    FILE *ids_out = NULL;
    if (ids_path && !(ids_out = fopen(ids_path, "w")))
        fb_fatal(FB_EXIT_IO, "--ids-out %s: cannot create: %s", ids_path, strerror(errno));

    const int threads = train_choose_threads();
    infer_model_t g;
    infer_model_open(&g, ckpt, model_dir, tokenizer, 1);
    infer_prompt_t pr;
    infer_prompt_make(&pr, g.tok, genre, ptext, plen, stop_chapter);
    free(ptext);
    if ((long long)pr.ids.n + max_new > (1 << 30))
        fb_fatal(FB_EXIT_USAGE, "prompt (%zu tokens) + --max-new-tokens %lld is too long", pr.ids.n, max_new);

    /* the decoder keeps its own KV cache and scratch: the model's
     * activations are only the one-row buffers of its forward (max_tokens 1) */
    decoder_t *d = decoder_create(g.model, (int)pr.ids.n + (int)max_new);
    /* OMP_NUM_THREADS unset: the count is ours to choose, token by token */
    gen_options_t o = {pr.ids.ids, (int)pr.ids.n, (int)max_new, sp, (uint64_t)seed,
                       (int)samples, pr.stop, pr.nstop, ids_out, threads, getenv("OMP_NUM_THREADS") == NULL};
    gen_stats_t st;
    int code = generate(d, g.tok, &o, stdout, &st);
    if (ids_out && fclose(ids_out) != 0)
        code = FB_EXIT_IO;
    if (code != 0)
        fb_fatal(FB_EXIT_IO, "cannot write the output (%s)", ids_out ? "stdout or --ids-out" : "stdout");
    char split[160] = "";
    if (threads > 1)
        snprintf(split, sizeof split, "; decode steps on %d threads: %ld, on 1: %ld%s", threads, st.decoded_at[0],
                 st.decoded_at[1], o.adapt_threads ? " (chosen by timing; OMP_NUM_THREADS fixes the count)" : "");
    fprintf(stderr,
            "fabula generate: prefill %d tokens in %.3f s (%.1f tokens/s); decode %ld tokens in %.3f s "
            "(%.1f tokens/s), %lld sample(s)%s\n",
            st.prompt_tokens, st.prefill_s, st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0.0, st.decoded,
            st.decode_s, st.decode_s > 0 ? st.decoded / st.decode_s : 0.0, samples, split);
    decoder_free(d);
    infer_prompt_free(&pr);
    infer_model_close(&g);
    cli_args_free(&a);
    parallel_finalize();
    return FB_EXIT_OK;
}
