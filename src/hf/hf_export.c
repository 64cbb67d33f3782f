/* `fabula export` (hf_export.h): the tensors, their shards and the files
 * around them. */
#include "hf/hf_export.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_tensors.h"
#include "io/atomic_file.h"
#include "io/safetensors_write.h"
#include "cpu/half_conv.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"
#include "util/error.h"
#include "util/timer.h"

/* The shards are written under temporary names and renamed once every
 * tensor has been read and checked, so a damaged checkpoint leaves no
 * model file that looks complete; hf_export_abandon removes them. */
static char **pending;
static size_t npending;

void hf_export_abandon(void)
{
    for (size_t i = 0; i < npending; i++) {
        if (pending[i])
            unlink(pending[i]);
        free(pending[i]);
    }
    free(pending);
    pending = NULL;
    npending = 0;
}

static const char *const DTYPE_ST[] = {"F32", "BF16", "F16"};
static const char *const DTYPE_TORCH[] = {"float32", "bfloat16", "float16"};
static const size_t DTYPE_SIZE[] = {4, 2, 2};

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The tensors the Llama/Mixtral classes expect for mc, with their shapes,
 * must be exactly the checkpoint's (names are fabula's Hugging Face names,
 * docs/model.md): anything else is a checkpoint this export does not fit. */
static void check_names(const char *ckpt, const ckpt_tensors_t *c, const model_config_t *mc)
{
    const uint64_t D = (uint64_t)mc->hidden_size, I = (uint64_t)mc->intermediate_size, V = (uint64_t)mc->vocab_size;
    const uint64_t hd = D / (uint64_t)mc->num_attention_heads;
    const uint64_t Q = hd * (uint64_t)mc->num_attention_heads, KV = hd * (uint64_t)mc->num_key_value_heads;
    size_t expected = 0;
    char name[160];
#define EXPECT_T(r, cols)                                                                                   \
    do {                                                                                                    \
        expected++;                                                                                         \
        long i_ = ckpt_tensors_find(c, name);                                                               \
        uint64_t d_[2];                                                                                     \
        int nd_ = i_ >= 0 ? ckpt_tensors_shape(c, (size_t)i_, d_) : 0;                                      \
        if (i_ < 0)                                                                                         \
            fb_fatal(FB_EXIT_DATA, "checkpoint %s: tensor %s is missing for its model config", ckpt, name); \
        if ((cols) ? nd_ != 2 || d_[0] != (r) || d_[1] != (cols) : nd_ != 1 || d_[0] != (r))                \
            fb_fatal(FB_EXIT_DATA, "checkpoint %s: tensor %s has the wrong shape for its model config", ckpt, \
                     name);                                                                                 \
    } while (0)
    snprintf(name, sizeof name, "model.embed_tokens.weight");
    EXPECT_T(V, D);
    snprintf(name, sizeof name, "model.norm.weight");
    EXPECT_T(D, 0);
    if (!mc->tie_word_embeddings) {
        snprintf(name, sizeof name, "lm_head.weight");
        EXPECT_T(V, D);
    }
    for (int l = 0; l < mc->num_hidden_layers; l++) {
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        EXPECT_T(D, 0);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        EXPECT_T(D, 0);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", l);
        EXPECT_T(Q, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", l);
        EXPECT_T(KV, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.weight", l);
        EXPECT_T(KV, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l);
        EXPECT_T(D, Q);
        if (hf_model_is_moe(mc)) {
            snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", l);
            EXPECT_T((uint64_t)mc->num_local_experts, D);
            for (int e = 0; e < mc->num_local_experts; e++) {
                snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e);
                EXPECT_T(I, D);
                snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e);
                EXPECT_T(I, D);
                snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
                EXPECT_T(D, I);
            }
        } else {
            snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", l);
            EXPECT_T(I, D);
            snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", l);
            EXPECT_T(I, D);
            snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l);
            EXPECT_T(D, I);
        }
    }
#undef EXPECT_T
    if (expected != ckpt_tensors_count(c))
        fb_fatal(FB_EXIT_DATA, "checkpoint %s: %zu tensors, its model config has %zu", ckpt, ckpt_tensors_count(c),
                 expected);
}

static int is_ours(const char *name)
{
    static const char *const files[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (!strcmp(name, files[i]))
            return 1;
    /* a killed export's ".model....safetensors.partial" */
    size_t n = strlen(name);
    if (name[0] == '.' && n > 8 && !strcmp(name + n - 8, ".partial"))
        return 1;
    /* model-00001-of-00003.safetensors */
    unsigned a, b;
    char tail[32];
    return sscanf(name, "model-%5u-of-%5u.%31s", &a, &b, tail) == 3 && !strcmp(tail, "safetensors");
}

/* An existing DIR without --force is refused; with it, the files an export
 * writes are removed first (a smaller shard count must not leave stale
 * shards), anything else in it is kept. */
static void prepare_dir(const char *dir, int force)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            fb_fatal(FB_EXIT_USAGE, "--output %s exists and is not a directory", dir);
        if (!force)
            fb_fatal(FB_EXIT_USAGE, "--output %s exists (use --force to replace its exported files)", dir);
        DIR *d = opendir(dir);
        if (!d)
            fb_fatal(FB_EXIT_IO, "%s: cannot read the directory: %s", dir, strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!is_ours(e->d_name))
                continue;
            char *p = join(dir, e->d_name);
            if (unlink(p) != 0)
                fb_fatal(FB_EXIT_IO, "%s: cannot remove: %s", p, strerror(errno));
            free(p);
        }
        closedir(d);
    } else if (errno != ENOENT) {
        fb_fatal(FB_EXIT_IO, "--output %s: %s", dir, strerror(errno));
    }
    fs_mkdirs(dir);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char *p = join(dir, name);
    atomic_write_file(p, text, strlen(text));
    free(p);
}

/* fp32 values into the export dtype, little-endian (x86 and aarch64 are;
 * a big-endian host is refused at start). Returns how many finite values
 * became infinite (fp16 above 65504; bf16 only near FLT_MAX). */
static size_t convert(const float *x, size_t n, int dtype, void *out)
{
    if (dtype == HF_DTYPE_F32) {
        memcpy(out, x, n * sizeof *x);
        return 0;
    }
    uint16_t *o = out;
    size_t overflow = 0;
    for (size_t i = 0; i < n; i++) {
        o[i] = dtype == HF_DTYPE_BF16 ? fb_bf16_from_f32(x[i]) : fb_f16_from_f32(x[i]);
        const uint16_t inf = dtype == HF_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
        overflow += (o[i] & 0x7fffu) == inf && (fb_f32_bits(x[i]) & 0x7fffffffu) < 0x7f800000u;
    }
    return overflow;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void hf_export(const hf_export_opts_t *o)
{
    if (!host_is_little_endian())
        fb_fatal(FB_EXIT_USAGE, "export: safetensors is little-endian; this host is not (not supported)");
    ckpt_tensors_t *c = ckpt_tensors_open(o->checkpoint);
    model_config_t mc;
    char *tok_spec = NULL;
    hf_model_from_config(o->checkpoint, ckpt_tensors_config(c), &mc, &tok_spec);
    hf_model_check(o->checkpoint, &mc, o->allow_dropless, o->quiet);
    check_names(o->checkpoint, c, &mc);
    const char *spec = o->tokenizer ? o->tokenizer : tok_spec;
    if (!spec)
        fb_fatal(FB_EXIT_USAGE, "checkpoint %s: its saved config names no data.tokenizer; give --tokenizer T",
                 o->checkpoint);
    /* a training run names its tokenizer as it was given, relative to where
     * it ran: say so rather than only that the file is missing */
    if (!o->tokenizer && strcmp(spec, "bytes") != 0 && access(spec, R_OK) != 0)
        fb_fatal(FB_EXIT_IO, "checkpoint %s: its data.tokenizer %s cannot be read from here: %s (give --tokenizer T)",
                 o->checkpoint, spec, strerror(errno));
    tokenizer_t *tok = tokenizer_load(spec);
    if (tokenizer_vocab_size(tok) > mc.vocab_size)
        fb_fatal(FB_EXIT_DATA, "tokenizer %s: vocabulary %d is larger than the model's vocab_size %d", spec,
                 tokenizer_vocab_size(tok), mc.vocab_size);
    prepare_dir(o->output, o->force);

    /* shards: tensors in name order, a new shard when the next tensor would
     * take the current one past the limit (transformers' own rule) */
    const size_t n = ckpt_tensors_count(c), esz = DTYPE_SIZE[o->dtype];
    st_tensor_t *st = fb_calloc(n, sizeof *st);
    size_t *shard_of = fb_calloc(n, sizeof *shard_of);
    size_t nshards = 0, largest = 0;
    uint64_t in_shard = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d[2];
        st[i].name = ckpt_tensors_name(c, i);
        st[i].dtype = DTYPE_ST[o->dtype];
        st[i].ndim = ckpt_tensors_shape(c, i, d);
        st[i].shape[0] = d[0];
        st[i].shape[1] = d[1];
        st[i].nbytes = ckpt_tensors_numel(c, i) * esz;
        if (ckpt_tensors_numel(c, i) > largest)
            largest = ckpt_tensors_numel(c, i);
        if (nshards == 0 || (in_shard > 0 && in_shard + st[i].nbytes > o->max_shard_bytes)) {
            nshards++;
            in_shard = 0;
        }
        shard_of[i] = nshards - 1;
        in_shard += st[i].nbytes;
        total += st[i].nbytes;
    }
    if (nshards > 99999)
        fb_fatal(FB_EXIT_USAGE, "--max-shard-size %llu makes %zu shards (at most 99999)",
                 (unsigned long long)o->max_shard_bytes, nshards);

    float *buf = fb_malloc(largest * sizeof *buf);
    void *obuf = o->dtype == HF_DTYPE_F32 ? (void *)buf : fb_malloc(largest * esz);
    char **shard_name = fb_calloc(nshards, sizeof *shard_name);
    const double t0 = timer_now();
    double last = t0;
    uint64_t done = 0;
    for (size_t s = 0, i = 0; s < nshards; s++) {
        char nm[64];
        if (nshards == 1)
            snprintf(nm, sizeof nm, "model.safetensors");
        else
            snprintf(nm, sizeof nm, "model-%05zu-of-%05zu.safetensors", s + 1, nshards);
        shard_name[s] = fb_strdup(nm);
        size_t first = i;
        while (i < n && shard_of[i] == s)
            i++;
        char tmpname[80];
        snprintf(tmpname, sizeof tmpname, ".%s.partial", nm);
        char *path = join(o->output, tmpname);
        pending = fb_realloc(pending, (npending + 1) * sizeof *pending);
        pending[npending++] = fb_strdup(path);
        st_writer_t *w = safetensors_create(path, st + first, i - first);
        for (size_t k = first; k < i; k++) {
            ckpt_tensors_read(c, k, buf);
            size_t inf = convert(buf, ckpt_tensors_numel(c, k), o->dtype, obuf);
            if (inf)
                fb_warn("export: tensor %s: %zu finite value%s beyond the range of %s, written as inf", st[k].name,
                        inf, inf == 1 ? "" : "s", DTYPE_TORCH[o->dtype]);
            safetensors_append(w, obuf, st[k].nbytes);
            done += st[k].nbytes;
            double t = timer_now();
            if (!o->quiet && (t - last >= 1.0 || k + 1 == n)) {
                double rate = done / (t - t0 > 1e-9 ? t - t0 : 1e-9);
                fprintf(stderr, "fabula: export: tensor %zu/%zu, %.1f of %.1f MB, %.0f MB/s, ETA %.0f s\n", k + 1,
                        n, done / 1e6, total / 1e6, rate / 1e6, (double)(total - done) / rate);
                last = t;
            }
        }
        safetensors_finish(w);
        free(path);
    }
    for (size_t s = 0; s < nshards; s++) {
        char *final = join(o->output, shard_name[s]);
        if (rename(pending[s], final) != 0)
            fb_fatal(FB_EXIT_IO, "cannot rename %s to %s: %s", pending[s], final, strerror(errno));
        free(final);
        free(pending[s]);
        pending[s] = NULL;
    }
    hf_export_abandon();
    if (nshards > 1) {
        /* the index transformers follows: metadata.total_size (tensor
         * bytes, headers excluded) and which file holds each tensor */
        size_t cap = 256 + n * 200;
        char *idx = fb_malloc(cap);
        size_t k = (size_t)snprintf(idx, cap, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
                                    (unsigned long long)total);
        for (size_t i = 0; i < n; i++)
            k += (size_t)snprintf(idx + k, cap - k, "    \"%s\": \"%s\"%s\n", st[i].name, shard_name[shard_of[i]],
                                  i + 1 < n ? "," : "");
        k += (size_t)snprintf(idx + k, cap - k, "  }\n}\n");
        FB_ASSERT(k < cap);
        write_text(o->output, "model.safetensors.index.json", idx);
        free(idx);
    }
    const int bos = tokenizer_export_bos(tok), eos = tokenizer_export_eos(tok), pad = tokenizer_export_pad(tok);
    char *cfg = hf_config_json(&mc, DTYPE_TORCH[o->dtype], bos, eos, pad);
    write_text(o->output, "config.json", cfg);
    free(cfg);
    char *gen = hf_generation_config_json(bos, eos, pad);
    write_text(o->output, "generation_config.json", gen);
    free(gen);
    tokenizer_export_hf(tok, o->output, mc.max_position_embeddings);
    if (!o->quiet)
        fprintf(stderr,
                "fabula: export: wrote %s: %s, %zu tensors, %.1f MB %s in %zu file%s, tokenizer %s (%s), %.2f s\n",
                o->output, hf_model_is_moe(&mc) ? "MixtralForCausalLM" : "LlamaForCausalLM", n, total / 1e6,
                DTYPE_TORCH[o->dtype], nshards, nshards == 1 ? "" : "s", spec, tokenizer_kind(tok), timer_now() - t0);
    for (size_t s = 0; s < nshards; s++)
        free(shard_name[s]);
    free(shard_name);
    if (obuf != buf)
        free(obuf);
    free(buf);
    free(shard_of);
    free(st);
    tokenizer_free(tok);
    free(tok_spec);
    ckpt_tensors_close(c);
}
