#include "tokenizer/tokenizer_export.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/bytemap.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

int32_t tokenizer_export_bos(const tokenizer_t *t) { return tokenizer_special(t, "<|bos|>"); }
int32_t tokenizer_export_eos(const tokenizer_t *t) { return tokenizer_special(t, "<|eos|>"); }
int32_t tokenizer_export_pad(const tokenizer_t *t) { return tokenizer_special(t, "<|pad|>"); }

static json_t *jnew(json_t *v)
{
    if (!v)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory building JSON");
    return v;
}

static void jset(json_t *obj, const char *key, json_t *v)
{
    if (json_object_set_new(obj, key, jnew(v)) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "cannot build JSON key %s", key);
}

static void jpush(json_t *arr, json_t *v)
{
    if (json_array_append_new(arr, jnew(v)) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "cannot build a JSON array");
}

/* Byte-level text of id's bytes (GPT-2's bytes_to_unicode per byte). */
static char *bytelevel_text(const tokenizer_t *t, int32_t id)
{
    size_t n;
    const uint8_t *b = tokenizer_token_bytes(t, id, &n);
    char *s = fb_malloc(2 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)bytelevel_char_utf8(b[i], s + k);
    s[k] = '\0';
    return s;
}

static json_t *added_token(const char *content, int32_t id)
{
    json_t *a = jnew(json_object());
    jset(a, "id", json_integer(id));
    jset(a, "content", json_string(content));
    jset(a, "single_word", json_false());
    jset(a, "lstrip", json_false());
    jset(a, "rstrip", json_false());
    jset(a, "normalized", json_false());
    jset(a, "special", json_true());
    return a;
}

static json_t *bytelevel_step(void)
{
    json_t *s = jnew(json_object());
    jset(s, "type", json_string("ByteLevel"));
    jset(s, "add_prefix_space", json_false());
    jset(s, "trim_offsets", json_false());
    jset(s, "use_regex", json_false());
    return s;
}

/* bytes and fabula-bpe as a tokenizers BPE model. */
static json_t *build_bytelevel_bpe(const tokenizer_t *t)
{
    json_t *root = jnew(json_object());
    jset(root, "version", json_string("1.0"));
    jset(root, "truncation", json_null());
    jset(root, "padding", json_null());
    json_t *added = jnew(json_array());
    for (int i = 0; i < t->nspecial; i++)
        jpush(added, added_token(t->special_text[i], t->special_id[i]));
    jset(root, "added_tokens", added);
    jset(root, "normalizer", json_null());
    json_t *steps = jnew(json_array());
    if (t->pretok) {
        /* fabula-bpe: its one regex split, Isolated, on the raw text */
        FB_ASSERT(pretok_nsteps(t->pretok) == 1 && !pretok_step_bytelevel(t->pretok, 0));
        const char *pattern;
        int literal, invert;
        pretok_behavior_t beh;
        pretok_step_get(t->pretok, 0, &pattern, &literal, &beh, &invert);
        FB_ASSERT(!literal && beh == PRETOK_ISOLATED && !invert);
        json_t *split = jnew(json_object());
        jset(split, "type", json_string("Split"));
        json_t *pat = jnew(json_object());
        jset(pat, "Regex", json_string(pattern));
        jset(split, "pattern", pat);
        jset(split, "behavior", json_string("Isolated"));
        jset(split, "invert", json_false());
        jpush(steps, split);
    }
    jpush(steps, bytelevel_step());
    json_t *pre = jnew(json_object());
    jset(pre, "type", json_string("Sequence"));
    jset(pre, "pretokenizers", steps);
    jset(root, "pre_tokenizer", pre);
    jset(root, "post_processor", json_null());
    jset(root, "decoder", bytelevel_step());

    json_t *model = jnew(json_object());
    jset(model, "type", json_string("BPE"));
    jset(model, "dropout", json_null());
    jset(model, "unk_token", json_null());
    jset(model, "continuing_subword_prefix", json_null());
    jset(model, "end_of_word_suffix", json_null());
    jset(model, "fuse_unk", json_false());
    jset(model, "byte_fallback", json_false());
    jset(model, "ignore_merges", json_false());
    json_t *vocab = jnew(json_object());
    for (int32_t id = 0; id < t->vocab_size; id++) {
        if (!(t->flags[id] & TOKF_PRESENT) || (t->flags[id] & TOKF_SPECIAL))
            continue;
        char *s = bytelevel_text(t, id);
        /* the format maps text to one id: two ids with the same bytes
         * (possible in principle from two merge orders) cannot both exist */
        if (json_object_get(vocab, s))
            fb_fatal(FB_EXIT_DATA,
                     "tokenizer %s: ids %lld and %d have the same bytes; a tokenizer.json cannot express that",
                     t->source, json_integer_value(json_object_get(vocab, s)), (int)id);
        jset(vocab, s, json_integer(id));
        free(s);
    }
    jset(model, "vocab", vocab);
    json_t *merges = jnew(json_array());
    size_t nm = t->bpe ? bpe_nmerges(t->bpe) : 0;
    for (size_t r = 0; r < nm; r++) {
        int32_t l, rr, res;
        bpe_merge_get(t->bpe, r, &l, &rr, &res);
        char *a = bytelevel_text(t, l), *b = bytelevel_text(t, rr);
        /* "left right": byte-level text has no space (a space is U+0120) */
        size_t n = strlen(a) + strlen(b) + 2;
        char *m = fb_malloc(n);
        snprintf(m, n, "%s %s", a, b);
        jpush(merges, json_string(m));
        free(m);
        free(a);
        free(b);
    }
    jset(model, "merges", merges);
    jset(root, "model", model);
    return root;
}

/* hf-bpe: the file it came from, plus the specials its added_tokens lack. */
static json_t *build_from_source(const tokenizer_t *t)
{
    json_error_t err;
    json_t *root = json_load_file(t->source, JSON_ALLOW_NUL, &err);
    if (!root)
        fb_fatal(FB_EXIT_DATA, "tokenizer %s: cannot be read back: %s (line %d)", t->source, err.text, err.line);
    json_t *added = json_object_get(root, "added_tokens");
    if (!added || json_is_null(added)) {
        added = jnew(json_array());
        jset(root, "added_tokens", added);
    }
    FB_ASSERT(json_is_array(added)); /* the loader refused anything else */
    for (int i = 0; i < t->nspecial; i++) {
        int found = 0;
        size_t k;
        json_t *a;
        json_array_foreach(added, k, a)
        {
            json_t *id = json_object_get(a, "id");
            if (json_is_integer(id) && json_integer_value(id) == t->special_id[i])
                found = 1;
        }
        if (!found)
            jpush(added, added_token(t->special_text[i], t->special_id[i]));
    }
    return root;
}

static void write_json(const char *dir, const char *name, json_t *root)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (!text)
        fb_fatal(FB_EXIT_INTERNAL, "cannot serialise %s", name);
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = fb_malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    size_t len = strlen(text);
    text[len] = '\0';
    char *withnl = fb_malloc(len + 2);
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    atomic_write_file(path, withnl, len + 1);
    free(withnl);
    free(text);
    free(path);
}

static int is_role(const char *s) { return !strcmp(s, "<|bos|>") || !strcmp(s, "<|eos|>") || !strcmp(s, "<|pad|>"); }

void tokenizer_export_hf(const tokenizer_t *t, const char *dir, int model_max_length)
{
    json_t *tok = t->kind == TOKENIZER_HF ? build_from_source(t) : build_bytelevel_bpe(t);
    write_json(dir, "tokenizer.json", tok);
    json_decref(tok);

    /* the roles transformers knows by name, and every other special as an
     * additional special token (genres, chapter separator, ...) */
    json_t *map = jnew(json_object());
    const char *roles[3][2] = {{"bos_token", "<|bos|>"}, {"eos_token", "<|eos|>"}, {"pad_token", "<|pad|>"}};
    for (int r = 0; r < 3; r++)
        if (tokenizer_special(t, roles[r][1]) >= 0)
            jset(map, roles[r][0], json_string(roles[r][1]));
    json_t *extra = jnew(json_array());
    for (int i = 0; i < t->nspecial; i++)
        if (!is_role(t->special_text[i]))
            jpush(extra, json_string(t->special_text[i]));
    jset(map, "additional_special_tokens", extra);
    write_json(dir, "special_tokens_map.json", map);

    json_t *cfg = jnew(json_object());
    json_t *dec = jnew(json_object());
    for (int i = 0; i < t->nspecial; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", (int)t->special_id[i]);
        json_t *a = added_token(t->special_text[i], t->special_id[i]);
        json_object_del(a, "id");
        jset(dec, key, a);
    }
    jset(cfg, "added_tokens_decoder", dec);
    json_t *v;
    const char *k;
    json_object_foreach(map, k, v) jset(cfg, k, json_deep_copy(v));
    jset(cfg, "clean_up_tokenization_spaces", json_false());
    jset(cfg, "model_max_length", json_integer(model_max_length));
    jset(cfg, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    write_json(dir, "tokenizer_config.json", cfg);
    json_decref(cfg);
    json_decref(map);
}
