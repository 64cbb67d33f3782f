/* Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Qwen2,
 * Llama-3 style) read into fabula's tokenizer; docs/tokenizer.md lists what
 * is accepted, what is refused and why. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytelevel.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

static const char *str_or(json_t *v, const char *dflt) { return json_is_string(v) ? json_string_value(v) : dflt; }

static int bool_or(const char *path, json_t *obj, const char *key, int dflt)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return dflt;
    if (!json_is_boolean(v))
        fb_fatal(FB_EXIT_DATA, "%s: \"%s\" must be true or false", path, key);
    return json_is_true(v);
}

static void check_normalizer(const char *path, json_t *n)
{
    if (!n || json_is_null(n))
        return;
    const char *type = str_or(json_object_get(n, "type"), "?");
    if (!strcmp(type, "Sequence") && json_array_size(json_object_get(n, "normalizers")) == 0)
        return;
    if (!strcmp(type, "NFC")) {
        /* Qwen2 ships NFC. fabula keeps every byte (decode(encode(x)) == x),
         * so it does not normalise: ids are Hugging Face's for text that is
         * already NFC, as novels almost always are. */
        fb_warn("%s: normalizer NFC is not applied; ids equal Hugging Face's for text already in NFC", path);
        return;
    }
    fb_fatal(FB_EXIT_DATA,
             "%s: normalizer \"%s\" is not supported (byte-level BPE files use none, or NFC); it would change the "
             "text, and fabula's tokenizers must give back every byte",
             path, type);
}

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Hugging Face compiles Split regexes with Oniguruma, which reads \uHHHH as
 * a code point; PCRE2 spells that \x{HHHH}. Everything else the patterns in
 * use need (\p{..}, \s, (?i:..), lookahead, \x{..}) is the same in both. */
static char *onig_to_pcre2(const char *pat)
{
    size_t n = strlen(pat);
    char *out = fb_malloc(2 * n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (pat[i] == '\\' && i + 1 < n) {
            if (pat[i + 1] == 'u' && i + 5 < n && is_hex(pat[i + 2]) && is_hex(pat[i + 3]) && is_hex(pat[i + 4]) &&
                is_hex(pat[i + 5])) {
                o += sprintf(o, "\\x{%.4s}", pat + i + 2);
                i += 5;
            } else {
                *o++ = pat[i++];
                *o++ = pat[i];
            }
        } else {
            *o++ = pat[i];
        }
    }
    *o = '\0';
    return out;
}

static void add_split(const char *path, pretok_t *p, const char *pattern, int literal, pretok_behavior_t beh,
                      int invert)
{
    char err[1024];
    char *pcre = literal ? fb_strdup(pattern) : onig_to_pcre2(pattern);
    if (pretok_add_split(p, pcre, literal, beh, invert, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_DATA, "%s: pre_tokenizer: %s", path, err);
    free(pcre);
}

/* One item of the pre-tokenizer (a Sequence's element or the whole thing).
 * Returns 1 for the ByteLevel item, which must come last. */
static int add_pretok_item(const char *path, pretok_t *p, json_t *item, int seen_bytelevel)
{
    const char *type = str_or(json_object_get(item, "type"), "?");
    if (seen_bytelevel)
        fb_fatal(FB_EXIT_DATA,
                 "%s: pre_tokenizer \"%s\" after ByteLevel is not supported (it would split byte-level text)", path,
                 type);
    if (!strcmp(type, "ByteLevel")) {
        if (bool_or(path, item, "add_prefix_space", 0))
            fb_fatal(FB_EXIT_DATA,
                     "%s: ByteLevel add_prefix_space=true is not supported: it adds a space to the text, so decode "
                     "could not give back the input exactly",
                     path);
        if (bool_or(path, item, "use_regex", 1))
            add_split(path, p, PRETOK_GPT2_PATTERN, 0, PRETOK_ISOLATED, 0);
        return 1;
    }
    if (!strcmp(type, "Split")) {
        json_t *pat = json_object_get(item, "pattern");
        json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        if (!json_is_string(re) && !json_is_string(lit))
            fb_fatal(FB_EXIT_DATA, "%s: Split pre_tokenizer needs \"pattern\": {\"Regex\": ...} or {\"String\": ...}",
                     path);
        const char *beh = str_or(json_object_get(item, "behavior"), "?");
        pretok_behavior_t b;
        if (!strcmp(beh, "Isolated"))
            b = PRETOK_ISOLATED;
        else if (!strcmp(beh, "MergedWithPrevious"))
            b = PRETOK_MERGED_WITH_PREVIOUS;
        else if (!strcmp(beh, "MergedWithNext"))
            b = PRETOK_MERGED_WITH_NEXT;
        else if (!strcmp(beh, "Contiguous"))
            b = PRETOK_CONTIGUOUS;
        else
            fb_fatal(FB_EXIT_DATA, "%s: Split behavior \"%s\" is not supported (Removed would drop text)", path, beh);
        add_split(path, p, json_is_string(re) ? json_string_value(re) : json_string_value(lit), !json_is_string(re),
                  b, bool_or(path, item, "invert", 0));
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        /* Hugging Face splits on char::is_numeric (categories Nd, Nl, No). */
        int individual = bool_or(path, item, "individual_digits", 0);
        add_split(path, p, individual ? "\\p{N}" : "\\p{N}+", 0, PRETOK_ISOLATED, 0);
        return 0;
    }
    fb_fatal(FB_EXIT_DATA,
             "%s: pre_tokenizer \"%s\" is not supported (byte-level BPE: ByteLevel, optionally after Split/Digits "
             "in a Sequence)",
             path, type);
}

static pretok_t *read_pretok(const char *path, json_t *pt)
{
    if (!pt || json_is_null(pt))
        fb_fatal(FB_EXIT_DATA, "%s: no pre_tokenizer: not a byte-level BPE tokenizer (ByteLevel is required)", path);
    pretok_t *p = pretok_new();
    int bytelevel = 0;
    if (!strcmp(str_or(json_object_get(pt, "type"), "?"), "Sequence")) {
        json_t *items = json_object_get(pt, "pretokenizers");
        if (!json_is_array(items))
            fb_fatal(FB_EXIT_DATA, "%s: Sequence pre_tokenizer needs \"pretokenizers\": [...]", path);
        for (size_t i = 0; i < json_array_size(items); i++)
            bytelevel |= add_pretok_item(path, p, json_array_get(items, i), bytelevel);
    } else {
        bytelevel = add_pretok_item(path, p, pt, 0);
    }
    if (!bytelevel)
        fb_fatal(FB_EXIT_DATA, "%s: the pre_tokenizer has no ByteLevel step: not a byte-level BPE tokenizer", path);
    return p;
}

static void check_model(const char *path, json_t *model)
{
    json_t *type = json_object_get(model, "type");
    if (type && strcmp(str_or(type, "?"), "BPE"))
        fb_fatal(FB_EXIT_DATA, "%s: model type \"%s\" is not supported (only byte-level BPE)", path, str_or(type, "?"));
    /* Old files (GPT-2's) have no "type": BPE is recognised by its merges. */
    if (!json_is_object(json_object_get(model, "vocab")) || !json_is_array(json_object_get(model, "merges")))
        fb_fatal(FB_EXIT_DATA, "%s: model needs \"vocab\" (object) and \"merges\" (array): not a BPE model", path);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        fb_fatal(FB_EXIT_DATA, "%s: BPE dropout is not supported (it makes encoding random)", path);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, affix[i]);
        if (v && !json_is_null(v) && (!json_is_string(v) || json_string_length(v) != 0))
            fb_fatal(FB_EXIT_DATA, "%s: a non-empty \"%s\" is not byte-level BPE; not supported", path, affix[i]);
    }
}

/* Tokens are looked up NUL-terminated (jansson >= 2.10 has no length-aware
 * lookup); byte-level tokens never contain a 0 byte (it is 'Ā'). */
static int32_t vocab_id(const char *path, json_t *vocab, const char *tok, const char *what, size_t i)
{
    json_t *v = json_object_get(vocab, tok);
    if (!v)
        fb_fatal(FB_EXIT_DATA, "%s: merges[%zu]: %s \"%s\" is not in the vocab", path, i, what, tok);
    return (int32_t)json_integer_value(v);
}

static void read_merges(const char *path, json_t *vocab, json_t *merges, bpe_t *bpe)
{
    char *cat = NULL;
    size_t catcap = 0;
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t na, nb;
        if (json_is_string(m)) {
            /* "a b": byte-level tokens never contain a space (it is 'Ġ'). */
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' '))
                fb_fatal(FB_EXIT_DATA, "%s: merges[%zu] \"%s\" is not two tokens separated by one space", path, i, a);
            na = (size_t)(sp - a);
            b = sp + 1;
            nb = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            na = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            nb = json_string_length(json_array_get(m, 1));
        } else {
            fb_fatal(FB_EXIT_DATA, "%s: merges[%zu] must be \"a b\" or [\"a\", \"b\"]", path, i);
        }
        if (na + nb + 2 > catcap)
            cat = fb_realloc(cat, catcap = 2 * (na + nb + 2));
        /* cat holds "a\0b\0" first, then "ab\0". */
        memcpy(cat, a, na);
        cat[na] = '\0';
        memcpy(cat + na + 1, b, nb);
        cat[na + 1 + nb] = '\0';
        int32_t l = vocab_id(path, vocab, cat, "token", i), r = vocab_id(path, vocab, cat + na + 1, "token", i);
        memmove(cat + na, cat + na + 1, nb + 1);
        int32_t res = vocab_id(path, vocab, cat, "merged token", i);
        bpe_add_merge(bpe, l, r, res);
    }
    free(cat);
}

tokenizer_t *tokenizer_hf_from_json(const char *path, json_t *root)
{
    json_t *model = json_object_get(root, "model");
    check_model(path, model);
    check_normalizer(path, json_object_get(root, "normalizer"));
    json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        fb_fatal(FB_EXIT_DATA, "%s: \"added_tokens\" must be an array", path);

    /* Ids: the vocab's and the added tokens'; fabula's specials go after the largest. */
    long long maxid = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= INT32_MAX / 2)
            fb_fatal(FB_EXIT_DATA, "%s: vocab[\"%s\"] must be a non-negative integer id", path, key);
        if (json_integer_value(val) > maxid)
            maxid = json_integer_value(val);
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX / 2 ||
            !json_is_string(json_object_get(a, "content")))
            fb_fatal(FB_EXIT_DATA, "%s: added_tokens[%zu] needs an integer \"id\" and a string \"content\"", path, i);
        if (json_integer_value(id) > maxid)
            maxid = json_integer_value(id);
    }
    tokenizer_t *t = tokenizer_alloc(TOKENIZER_HF, path, (int32_t)(maxid + 1));

    /* Vocab entries as bytes. A byte-level string decodes to its bytes;
     * anything else keeps its UTF-8 (Hugging Face's ByteLevel decoder does
     * the same), is flagged raw and can never come out of encode. */
    int ignore_merges = bool_or(path, model, "ignore_merges", 0);
    bytemap_t *whole = NULL;
    if (ignore_merges) {
        whole = fb_malloc(sizeof *whole);
        bytemap_init(whole);
    }
    uint8_t *buf = NULL;
    size_t bufcap = 0;
    json_object_foreach(vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        size_t klen = strlen(key);
        if (t->flags[id] & TOKF_PRESENT)
            fb_fatal(FB_EXIT_DATA, "%s: vocab id %d is given to two tokens", path, (int)id);
        if (klen > bufcap)
            buf = fb_realloc(buf, bufcap = 2 * klen);
        long n = bytelevel_decode(key, klen, buf);
        if (n < 0) {
            tokenizer_set_token(t, id, (const uint8_t *)key, klen, TOKF_RAW);
            continue;
        }
        tokenizer_set_token(t, id, buf, (size_t)n, 0);
        if (whole && n > 0) {
            uint64_t h = bytemap_hash(buf, (size_t)n);
            int inserted;
            uint64_t *v = bytemap_insert(whole, buf, (size_t)n, h, &inserted);
            if (inserted)
                *v = (uint64_t)id;
        }
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        json_t *c = json_object_get(a, "content");
        size_t clen = json_string_length(c);
        if (clen > bufcap)
            buf = fb_realloc(buf, bufcap = 2 * clen);
        tokenizer_add_special(t, json_string_value(c), id);
        long n = bytelevel_decode(json_string_value(c), clen, buf);
        if (n >= 0) /* decoded like any token, as Hugging Face's decoder does */
            tokenizer_set_token(t, id, buf, (size_t)n, TOKF_SPECIAL);
    }
    free(buf);

    int32_t base[256];
    for (int b = 0; b < 256; b++) {
        char ch[3] = {0};
        int n = bytelevel_char_utf8((uint8_t)b, ch);
        json_t *v = json_object_get(vocab, ch);
        if (!v)
            fb_fatal(FB_EXIT_DATA,
                     "%s: the vocab lacks the byte-level symbol \"%.*s\" of byte 0x%02X: not a byte-level BPE "
                     "vocabulary (every byte must be a token, or text could not round-trip)",
                     path, n, ch, b);
        base[b] = (int32_t)json_integer_value(v);
    }
    t->bpe = bpe_new(base);
    read_merges(path, vocab, json_object_get(model, "merges"), t->bpe);
    if (whole)
        bpe_set_whole_words(t->bpe, whole);
    t->pretok = read_pretok(path, json_object_get(root, "pre_tokenizer"));

    int32_t next = t->vocab_size;
    for (int k = 0; k < TOKENIZER_NSPECIAL; k++)
        if (tokenizer_special(t, tokenizer_fabula_special_name(k)) < 0) {
            tokenizer_grow(t, next + 1);
            tokenizer_add_special(t, tokenizer_fabula_special_name(k), next++);
        }
    tokenizer_compute_digest(t);
    return t;
}
