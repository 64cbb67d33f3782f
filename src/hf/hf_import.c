/* src/hf/hf_import.h: DIR's safetensors as fabula's parameters. */
#include "hf/hf_import.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "io/safetensors_read.h"
#include "util/error.h"

/* One tensor of fabula's table, where it lies, and for a table with more
 * vocabulary rows than the file, the mean row that fills the rest. */
typedef struct hf_entry {
    const char *name;       /* the table's view name (ep-1 table) */
    const st_file_t *file;
    const st_tensor_t *t;
    float *mean_row;        /* [D], computed at the first read past the file's rows */
} hf_entry_t;

struct hf_weights {
    char *dir;
    st_file_t *files;
    int nfiles;
    param_table_t table;    /* the ep-1 table of the config */
    hf_entry_t *entries;    /* one per view of `table`, same order */
};

static int fail(char *why, size_t cap, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return code;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A shard named in the index: a plain file name inside DIR (an index that
 * points elsewhere is not transformers'). */
static int shard_name_ok(const char *s) { return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."); }

/* The weight files: model.safetensors.index.json's shards, else
 * model.safetensors. Each file opened once; where each tensor is comes
 * from the headers, checked against the index's weight_map. */
static int open_files(hf_weights_t *w, char *why, size_t cap)
{
    char *index = join(w->dir, "model.safetensors.index.json");
    int code = 0;
    if (!exists(index)) {
        free(index);
        char *single = join(w->dir, "model.safetensors");
        if (!exists(single)) {
            code = fail(why, cap, FB_EXIT_DATA,
                        "%s: no model.safetensors or model.safetensors.index.json (model.init_from needs "
                        "transformers' save_pretrained with safe_serialization, its default)",
                        w->dir);
            free(single);
            return code;
        }
        w->files = fb_calloc(1, sizeof *w->files);
        code = st_open(&w->files[0], single, why, cap);
        w->nfiles = code ? 0 : 1;
        free(single);
        return code;
    }
    json_error_t err;
    json_t *root = NULL, *map = NULL;
    FILE *fp;
    code = regular_file_fopen(index, &fp, why, cap);
    if (code)
        goto out;
    root = json_loadf(fp, JSON_REJECT_DUPLICATES, &err);
    fclose(fp);
    if (!root) {
        code = fail(why, cap, FB_EXIT_DATA, "%s: %s (line %d)", index, err.text, err.line);
        goto out;
    }
    map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        code = fail(why, cap, FB_EXIT_DATA, "%s: no \"weight_map\" object", index);
        goto out;
    }
    const char *key;
    json_t *val;
    w->files = fb_calloc(json_object_size(map) + 1, sizeof *w->files);
    json_object_foreach(map, key, val) {
        if (!json_is_string(val) || !shard_name_ok(json_string_value(val))) {
            code = fail(why, cap, FB_EXIT_DATA, "%s: weight_map[\"%s\"] is not a file name in %s", index, key,
                        w->dir);
            goto out;
        }
        const char *shard = json_string_value(val);
        int have = 0;
        for (int i = 0; i < w->nfiles && !have; i++)
            have = !strcmp(strrchr(w->files[i].path, '/') + 1, shard);
        if (!have) {
            char *p = join(w->dir, shard);
            /* a shard the index names and the directory lacks: the
             * directory is incomplete (data), not unreadable */
            code = exists(p) ? st_open(&w->files[w->nfiles], p, why, cap)
                             : fail(why, cap, FB_EXIT_DATA, "%s: weight_map[\"%s\"] names %s, which is not in %s",
                                    index, key, shard, w->dir);
            free(p);
            if (code)
                goto out;
            w->nfiles++;
        }
    }
    /* every tensor is where the index says, and the index names every one */
    for (int i = 0; i < w->nfiles; i++) {
        const char *shard = strrchr(w->files[i].path, '/') + 1;
        for (int k = 0; k < w->files[i].n; k++) {
            json_t *where = json_object_get(map, w->files[i].t[k].name);
            if (!where || strcmp(json_string_value(where), shard)) {
                code = fail(why, cap, FB_EXIT_DATA, "%s: tensor \"%s\" is in %s, but %s says %s", w->files[i].path,
                            w->files[i].t[k].name, shard, index, where ? json_string_value(where) : "nothing");
                goto out;
            }
        }
    }
    json_object_foreach(map, key, val) {
        int found = 0;
        for (int i = 0; i < w->nfiles && !found; i++)
            found = st_find(&w->files[i], key) != NULL;
        if (!found) {
            code = fail(why, cap, FB_EXIT_DATA, "%s: tensor \"%s\" is missing from %s, where %s says it is",
                        w->dir, key, json_string_value(val), index);
            goto out;
        }
    }
out:
    json_decref(root);
    free(index);
    return code;
}

static int is_vocab_tensor(const char *name)
{
    return !strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight");
}

/* Tensors transformers saves that are no parameter of the function: the
 * RoPE frequencies of older Llama saves (fabula derives them from
 * rope_theta), and lm_head.weight of a tied model (a copy of the
 * embedding that some versions write). */
static int ignorable(const char *name, const model_config_t *mc)
{
    const char *tail = ".self_attn.rotary_emb.inv_freq";
    size_t n = strlen(name), k = strlen(tail);
    if (n > k && !strcmp(name + n - k, tail))
        return 1;
    return mc->tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

/* config.json's own vocab_size (model.vocab_size may be larger: rows the
 * import appends), or mc's when the file gives none. */
static int file_vocab_size(const char *dir, const model_config_t *mc, long long *vocab, char *why, size_t cap)
{
    *vocab = mc->vocab_size;
    char *path = join(dir, "config.json");
    FILE *fp;
    int code = regular_file_fopen(path, &fp, why, cap);
    if (!code) {
        json_error_t err;
        json_t *root = json_loadf(fp, 0, &err);
        fclose(fp);
        json_t *v = json_object_get(root, "vocab_size");
        if (!root)
            code = fail(why, cap, FB_EXIT_DATA, "%s: %s (line %d)", path, err.text, err.line);
        else if (json_is_integer(v))
            *vocab = json_integer_value(v);
        json_decref(root);
    }
    free(path);
    return code;
}

/* "[a, b]" of a shape */
static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    buf[0] = '\0';
    for (int d = 0; d < ndim; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", d ? ", " : "", (long long)shape[d]);
}

/* The rows of the embedding and lm_head (a tied model's copy too) are
 * config.json's vocab_size exactly: transformers' from_pretrained refuses
 * fewer and more alike, so a directory it would not load is not imported
 * either. The import appends rows only past that, for model.vocab_size. */
static int check_vocab_rows(const char *file, const char *name, const st_tensor_t *t, long long vocab,
                            int64_t hidden, int64_t rows_max, char *why, size_t cap)
{
    if (t->ndim == 2 && t->shape[0] == vocab && t->shape[1] == hidden && vocab <= rows_max)
        return 0;
    char fs[128];
    shape_text(fs, sizeof fs, t->ndim, t->shape);
    return fail(why, cap, FB_EXIT_DATA,
                "%s: tensor \"%s\" has shape [%s], but config.json's vocab_size is %lld and hidden_size %lld: it "
                "must be [%lld, %lld] (transformers refuses this directory too)",
                file, name, fs, vocab, (long long)hidden, vocab, (long long)hidden);
}

static int check_tensors(hf_weights_t *w, const model_config_t *mc, char *why, size_t cap)
{
    long long vocab;
    int code = file_vocab_size(w->dir, mc, &vocab, why, cap);
    if (code)
        return code;
    param_table_build(&w->table, mc);
    w->entries = fb_calloc((size_t)w->table.n, sizeof *w->entries);
    for (int i = 0; i < w->table.n; i++) {
        const param_view_t *v = &w->table.views[i];
        hf_entry_t *e = &w->entries[i];
        e->name = v->name;
        for (int f = 0; f < w->nfiles && !e->t; f++)
            if ((e->t = st_find(&w->files[f], v->name)))
                e->file = &w->files[f];
        if (!e->t)
            return fail(why, cap, FB_EXIT_DATA, "%s: tensor \"%s\" is missing (%s)", w->dir, v->name,
                        w->nfiles == 1 ? w->files[0].path : "no shard of model.safetensors.index.json has it");
        const st_tensor_t *t = e->t;
        if (is_vocab_tensor(v->name)) {
            code = check_vocab_rows(e->file->path, v->name, t, vocab, v->shape[1], v->shape[0], why, cap);
            if (code)
                return code;
        }
        int ok = t->ndim == v->ndim;
        for (int d = is_vocab_tensor(v->name); ok && d < v->ndim; d++)
            ok = t->shape[d] == v->shape[d];
        if (!ok) {
            char fs[128], ms[128];
            shape_text(fs, sizeof fs, t->ndim, t->shape);
            shape_text(ms, sizeof ms, v->ndim, v->shape);
            return fail(why, cap, FB_EXIT_DATA, "%s: tensor \"%s\" has shape [%s], but config.json's model needs [%s]",
                        e->file->path, v->name, fs, ms);
        }
        if (t->dtype == ST_OTHER)
            return fail(why, cap, FB_EXIT_DATA, "%s: tensor \"%s\" is %s: fabula reads F32, BF16 or F16 weights",
                        e->file->path, v->name, t->dtype_name);
    }
    for (int f = 0; f < w->nfiles; f++)
        for (int k = 0; k < w->files[f].n; k++) {
            const char *name = w->files[f].t[k].name;
            if (!param_table_find(&w->table, name) && !ignorable(name, mc))
                return fail(why, cap, FB_EXIT_DATA,
                            "%s: unexpected tensor \"%s\" (config.json's model has no such parameter)",
                            w->files[f].path, name);
            /* a tied model's lm_head copy is not read, but transformers
             * loads it, so its shape is the embedding's */
            if (!param_table_find(&w->table, name) && is_vocab_tensor(name)) {
                code = check_vocab_rows(w->files[f].path, name, &w->files[f].t[k], vocab, mc->hidden_size,
                                        mc->vocab_size, why, cap);
                if (code)
                    return code;
            }
        }
    return 0;
}

int hf_weights_open(hf_weights_t **out, const char *dir, const model_config_t *mc, char *why, size_t cap)
{
    hf_weights_t *w = fb_calloc(1, sizeof *w);
    w->dir = fb_strdup(dir);
    int code = open_files(w, why, cap);
    if (!code)
        code = check_tensors(w, mc, why, cap);
    if (code) {
        hf_weights_close(w);
        w = NULL;
    }
    *out = w;
    return code;
}

void hf_weights_close(hf_weights_t *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nfiles; i++)
        st_close(&w->files[i]);
    free(w->files);
    if (w->entries)
        for (int i = 0; i < w->table.n; i++)
            free(w->entries[i].mean_row);
    free(w->entries);
    param_table_free(&w->table);
    free(w->dir);
    free(w);
}

/* The mean of the file's rows of a vocabulary tensor (fp64 sums), read in
 * pieces so that a large embedding needs no second copy. */
static int mean_row(hf_entry_t *e, int64_t D, char *why, size_t cap)
{
    const int64_t rows = e->t->shape[0];
    double *sum = fb_calloc((size_t)D, sizeof *sum);
    const int64_t chunk = D > 0 && D < (1 << 20) ? ((1 << 20) + D - 1) / D : 1;
    float *buf = fb_malloc((size_t)(chunk * D) * sizeof *buf);
    int code = 0;
    for (int64_t r = 0; r < rows && !code; r += chunk) {
        const int64_t n = rows - r < chunk ? rows - r : chunk;
        code = st_read_f32(e->file, e->t, (uint64_t)(r * D), (uint64_t)((r + n) * D), buf, why, cap);
        for (int64_t i = 0; i < n * D && !code; i++)
            sum[i % D] += buf[i];
    }
    e->mean_row = fb_malloc((size_t)D * sizeof *e->mean_row);
    for (int64_t d = 0; d < D; d++)
        e->mean_row[d] = (float)(sum[d] / (double)rows);
    free(buf);
    free(sum);
    return code;
}

/* Elements [lo, hi) of the whole tensor `full` (flat positions). */
static int read_full(hf_entry_t *e, const param_view_t *full, size_t lo, size_t hi, float *dst, char *why, size_t cap)
{
    const size_t in_file = (size_t)e->t->numel;
    if (lo < in_file) {
        const size_t end = hi < in_file ? hi : in_file;
        int code = st_read_f32(e->file, e->t, lo, end, dst, why, cap);
        if (code)
            return code;
    }
    if (hi > in_file) {
        /* rows the tokenizer appended: the mean of the file's rows */
        const int64_t D = full->shape[1];
        if (!e->mean_row) {
            int code = mean_row(e, D, why, cap);
            if (code)
                return code;
        }
        for (size_t j = lo > in_file ? lo : in_file; j < hi; j++)
            dst[j - lo] = e->mean_row[(j - in_file) % (size_t)D];
    }
    return 0;
}

int hf_weights_read(hf_weights_t *w, const param_view_t *v, size_t lo, size_t hi, float *dst, char *why, size_t cap)
{
    const param_view_t *full = param_table_find(&w->table, v->name);
    FB_ASSERT(full && lo <= hi && hi <= v->numel && v->full_shape[0] == full->shape[0] &&
              v->full_shape[1] == full->shape[1]);
    hf_entry_t *e = &w->entries[full - w->table.views];
    /* v may be a tensor-parallel slice: a row slice is one run of the
     * file's tensor, a column slice one run per row */
    for (size_t x = lo; x < hi;) {
        size_t run = param_view_run(v, x);
        run = run < hi - x ? run : hi - x;
        const size_t at = param_view_full_pos(v, x);
        int code = read_full(e, full, at, at + run, dst + (x - lo), why, cap);
        if (code)
            return code;
        x += run;
    }
    return 0;
}

static void source_read(void *ctx, const param_view_t *v, size_t lo, size_t hi, float *dst)
{
    char why[1024];
    int code = hf_weights_read(ctx, v, lo, hi, dst, why, sizeof why);
    if (code)
        fb_fatal(code, "%s", why);
}

zero_init_source_t hf_weights_source(hf_weights_t *w) { return (zero_init_source_t){w, source_read}; }

void hf_weights_load(hf_weights_t *w, model_t *m)
{
    const param_table_t *t = model_params_table(m);
    /* one staging buffer for all tensors: a fresh one per tensor costs a
     * page fault per 4 KiB (a third of the time on a 1 GB model) */
    size_t most = 1;
    for (int i = 0; i < t->n; i++)
        if (t->views[i].numel > most)
            most = t->views[i].numel;
    float *host = fb_malloc(most * sizeof *host);
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        source_read(w, v, 0, v->numel, host);
        model_set_param(m, v, host);
    }
    free(host);
}

void hf_import_weights(const char *dir, model_t *m)
{
    char why[1024];
    hf_weights_t *w;
    int code = hf_weights_open(&w, dir, model_config(m), why, sizeof why);
    if (code)
        fb_fatal(code, "%s", why);
    FB_ASSERT(model_params_table(m)->ep_size == 1);
    hf_weights_load(w, m);
    hf_weights_close(w);
}
