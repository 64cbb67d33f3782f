#include "tokenizer/tokenizer_fabula.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

tokenizer_t *tokenizer_fabula_build(const char *source, const char *pattern, const int32_t *merges, size_t nmerges)
{
    FB_ASSERT(nmerges < (size_t)INT32_MAX - 512);
    int32_t nm = (int32_t)nmerges;
    tokenizer_t *t = tokenizer_alloc(TOKENIZER_FABULA, source, 256 + nm + TOKENIZER_NSPECIAL);
    int32_t base[256];
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        tokenizer_set_token(t, b, &c, 1, 0);
        base[b] = b;
    }
    t->bpe = bpe_new(base);
    uint8_t *tmp = NULL;
    size_t tmpcap = 0;
    for (int32_t i = 0; i < nm; i++) {
        int32_t l = merges[2 * i], r = merges[2 * i + 1], id = 256 + i;
        if (l < 0 || r < 0 || l >= id || r >= id)
            fb_fatal(FB_EXIT_DATA, "%s: merge %d is [%d, %d], but only ids 0..%d exist before it", source, (int)i,
                     (int)l, (int)r, (int)id - 1);
        size_t n = (size_t)t->len[l] + t->len[r];
        if (n > tmpcap)
            tmp = fb_realloc(tmp, tmpcap = 2 * n);
        memcpy(tmp, t->bytes + t->off[l], t->len[l]);
        memcpy(tmp + t->len[l], t->bytes + t->off[r], t->len[r]);
        tokenizer_set_token(t, id, tmp, n, 0);
        bpe_add_merge(t->bpe, l, r, id);
    }
    free(tmp);
    for (int k = 0; k < TOKENIZER_NSPECIAL; k++)
        tokenizer_add_special(t, tokenizer_fabula_special_name(k), 256 + nm + k);
    t->pretok = pretok_new();
    char err[512];
    if (pretok_add_split(t->pretok, pattern, 0, PRETOK_ISOLATED, 0, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_DATA, "%s: pre_tokenizer: %s", source, err);
    tokenizer_compute_digest(t);
    return t;
}

static char *json_quote(const char *s)
{
    json_t *j = json_string(s);
    if (!j)
        fb_fatal(FB_EXIT_INTERNAL, "cannot encode a string as JSON (not UTF-8?)");
    char *q = json_dumps(j, JSON_ENCODE_ANY);
    json_decref(j);
    if (!q)
        fb_fatal(FB_EXIT_INTERNAL, "json_dumps failed");
    return q;
}

char *tokenizer_fabula_to_json(const tokenizer_t *t, const tokenizer_train_info_t *info, size_t *len)
{
    FB_ASSERT(t->kind == TOKENIZER_FABULA);
    size_t nm = bpe_nmerges(t->bpe);
    const char *pattern;
    int literal, invert;
    pretok_behavior_t beh;
    pretok_step_get(t->pretok, 0, &pattern, &literal, &beh, &invert);
    char *qpat = json_quote(pattern);
    size_t cap = 4096 + strlen(qpat) + 32 * nm + 64 * TOKENIZER_NSPECIAL;
    char *out = fb_malloc(cap);
    size_t n = 0;
#define OUT(...) n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__)
    OUT("{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"digest\": \"%s\",\n", TOKENIZER_FABULA_FORMAT,
        TOKENIZER_FABULA_VERSION, t->digest);
    OUT("  \"vocab_size\": %d,\n  \"byte_tokens\": 256,\n", (int)t->vocab_size);
    OUT("  \"pre_tokenizer\": {\"type\": \"split\", \"behavior\": \"isolated\", \"pattern\": %s},\n", qpat);
    OUT("  \"special_tokens\": [\n");
    for (int i = 0; i < t->nspecial; i++) {
        char *q = json_quote(t->special_text[i]);
        OUT("    {\"id\": %d, \"content\": %s}%s\n", (int)t->special_id[i], q, i + 1 < t->nspecial ? "," : "");
        free(q);
    }
    OUT("  ],\n");
    if (info)
        OUT("  \"training\": {\"vocab_size\": %lld, \"min_frequency\": %lld, \"novels\": %lld, \"bytes\": %lld, "
            "\"pretokens\": %lld, \"distinct_pretokens\": %lld},\n",
            info->vocab_size_requested, info->min_frequency, info->novels, info->bytes, info->pretokens,
            info->distinct_pretokens);
    OUT("  \"merges\": [");
    for (size_t i = 0; i < nm; i++) {
        int32_t l, r, res;
        bpe_merge_get(t->bpe, i, &l, &r, &res);
        OUT("%s\n    [%d, %d]", i ? "," : "", (int)l, (int)r);
    }
    OUT("%s]\n}\n", nm ? "\n  " : "");
#undef OUT
    FB_ASSERT(n < cap);
    free(qpat);
    *len = n;
    return out;
}

static json_t *need(const char *path, json_t *obj, const char *key, json_type type, const char *what)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_typeof(v) != type)
        fb_fatal(FB_EXIT_DATA, "%s: \"%s\" must be %s", path, key, what);
    return v;
}

tokenizer_t *tokenizer_fabula_from_json(const char *path, json_t *root)
{
    json_t *version = need(path, root, "version", JSON_INTEGER, "an integer");
    if (json_integer_value(version) != TOKENIZER_FABULA_VERSION)
        fb_fatal(FB_EXIT_DATA, "%s: fabula-tokenizer version %lld is not supported (this fabula reads version %d)",
                 path, (long long)json_integer_value(version), TOKENIZER_FABULA_VERSION);
    const char *digest = json_string_value(need(path, root, "digest", JSON_STRING, "a string (hex SHA-256)"));
    json_t *pt = need(path, root, "pre_tokenizer", JSON_OBJECT, "an object");
    json_t *type = json_object_get(pt, "type"), *beh = json_object_get(pt, "behavior");
    if (!json_is_string(type) || strcmp(json_string_value(type), "split") ||
        (beh && (!json_is_string(beh) || strcmp(json_string_value(beh), "isolated"))))
        fb_fatal(FB_EXIT_DATA, "%s: pre_tokenizer must be {\"type\": \"split\", \"behavior\": \"isolated\", ...}",
                 path);
    const char *pattern = json_string_value(need(path, pt, "pattern", JSON_STRING, "a string (regex)"));
    json_t *bt = json_object_get(root, "byte_tokens");
    if (bt && (!json_is_integer(bt) || json_integer_value(bt) != 256))
        fb_fatal(FB_EXIT_DATA, "%s: \"byte_tokens\" must be 256", path);

    json_t *jm = need(path, root, "merges", JSON_ARRAY, "an array of [left id, right id] pairs");
    size_t nm = json_array_size(jm);
    int32_t *merges = fb_malloc((2 * nm + 1) * sizeof *merges);
    for (size_t i = 0; i < nm; i++) {
        json_t *m = json_array_get(jm, i);
        json_t *l = json_array_get(m, 0), *r = json_array_get(m, 1);
        if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_integer(l) || !json_is_integer(r) ||
            json_integer_value(l) < 0 || json_integer_value(r) < 0 || json_integer_value(l) > INT32_MAX ||
            json_integer_value(r) > INT32_MAX)
            fb_fatal(FB_EXIT_DATA, "%s: merges[%zu] must be a pair of token ids [left, right]", path, i);
        merges[2 * i] = (int32_t)json_integer_value(l);
        merges[2 * i + 1] = (int32_t)json_integer_value(r);
    }
    tokenizer_t *t = tokenizer_fabula_build(path, pattern, merges, nm);
    free(merges);

    json_t *vs = json_object_get(root, "vocab_size");
    if (vs && (!json_is_integer(vs) || json_integer_value(vs) != t->vocab_size))
        fb_fatal(FB_EXIT_DATA, "%s: \"vocab_size\" must be 256 + merges + %d specials = %d", path,
                 TOKENIZER_NSPECIAL, (int)t->vocab_size);
    json_t *sp = need(path, root, "special_tokens", JSON_ARRAY, "an array of {\"id\", \"content\"}");
    if (json_array_size(sp) != TOKENIZER_NSPECIAL)
        fb_fatal(FB_EXIT_DATA, "%s: special_tokens must list the %d fabula special tokens", path, TOKENIZER_NSPECIAL);
    for (size_t i = 0; i < TOKENIZER_NSPECIAL; i++) {
        json_t *s = json_array_get(sp, i), *id = json_object_get(s, "id"), *content = json_object_get(s, "content");
        if (!json_is_integer(id) || !json_is_string(content) ||
            json_integer_value(id) != t->special_id[i] || strcmp(json_string_value(content), t->special_text[i]))
            fb_fatal(FB_EXIT_DATA, "%s: special_tokens[%zu] must be {\"id\": %d, \"content\": \"%s\"}", path, i,
                     (int)t->special_id[i], t->special_text[i]);
    }
    if (strcmp(digest, t->digest) != 0)
        fb_fatal(FB_EXIT_DATA,
                 "%s: digest mismatch: the file records %s but its content hashes to %s (the file was edited or "
                 "damaged; a new one comes from `fabula tokenizer train`)",
                 path, digest, t->digest);
    return t;
}
