/* Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Qwen2,
 * Llama-3 style) read into fabula's tokenizer; docs/tokenizer.md lists what
 * is accepted, what is refused and why. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytelevel.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"

static const char *str_or(json_t *v, const char *dflt) { return json_is_string(v) ? json_string_value(v) : dflt; }

/* The problems found in one file: all are reported together, then loading
 * fails (so one run lists everything to fix). */
#define HF_MAX_LISTED 40
typedef struct hf {
    const char *path;
    char *msgs;
    size_t len, cap;
    int n;
} hf_t;

static void problem(hf_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(hf_t *h, const char *fmt, ...)
{
    if (h->n++ >= HF_MAX_LISTED)
        return;
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    size_t k = strlen(tmp);
    if (h->len + k + 8 > h->cap)
        h->msgs = fb_realloc(h->msgs, h->cap = 2 * (h->len + k + 8));
    h->len += (size_t)sprintf(h->msgs + h->len, "\n  - %s", tmp);
}

static void fail_if_problems(hf_t *h)
{
    if (!h->n)
        return;
    fb_fatal(FB_EXIT_DATA, "%s: %d problem%s, not loaded:%s%s", h->path, h->n, h->n == 1 ? "" : "s", h->msgs,
             h->n > HF_MAX_LISTED ? "\n  - ... (only the first 40 are listed)" : "");
}

static int bool_or(hf_t *h, json_t *obj, const char *key, int dflt, const char *where)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return dflt;
    if (!json_is_boolean(v)) {
        problem(h, "%s: \"%s\" must be true or false", where, key);
        return dflt;
    }
    return json_is_true(v);
}

/* Every key of obj must be in the NULL-terminated list: a field fabula does
 * not know is refused, naming it, rather than passed over in silence. */
static void known_keys(hf_t *h, json_t *obj, const char *where, const char *const *keys)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        int ok = 0;
        for (const char *const *k = keys; *k && !ok; k++)
            ok = !strcmp(*k, key);
        if (!ok)
            problem(h, "%s: field \"%s\" is not supported", where, key);
    }
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

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

static void add_split(hf_t *h, pretok_t *p, const char *pattern, int literal, pretok_behavior_t beh, int invert,
                      int bytelevel)
{
    char err[1024];
    char *pcre = literal ? fb_strdup(pattern) : onig_to_pcre2(pattern);
    if (pretok_add_split(p, pcre, literal, beh, invert, err, sizeof err) != 0)
        problem(h, "pre_tokenizer: %s", err);
    else if (bytelevel)
        pretok_set_bytelevel(p);
    free(pcre);
}

/* A SplitDelimiterBehavior; 0 when it is refused or unknown. */
static int read_behavior(hf_t *h, json_t *item, const char *type, const char *dflt, pretok_behavior_t *b)
{
    json_t *v = json_object_get(item, "behavior");
    const char *beh = v ? str_or(v, "?") : dflt;
    static const char *names[] = {"Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(beh, names[i])) {
            *b = (pretok_behavior_t)i;
            return 1;
        }
    problem(h, "%s behavior \"%s\" is not supported%s", type, beh,
            !strcmp(beh, "Removed") ? " (Removed drops text)" : "");
    return 0;
}

/* One item of the pre-tokenizer (a Sequence's element or the whole thing).
 * Items after ByteLevel see byte-level text (Hugging Face maps the bytes to
 * characters there), so their splits are made on that text. Returns 1 for
 * the ByteLevel item. */
static int add_pretok_item(hf_t *h, pretok_t *p, json_t *item, int after_bytelevel)
{
    const char *type = str_or(json_object_get(item, "type"), "?");
    pretok_behavior_t b = PRETOK_ISOLATED;
    if (!strcmp(type, "ByteLevel")) {
        known_keys(h, item, "pre_tokenizer ByteLevel", KEYS("type", "add_prefix_space", "trim_offsets", "use_regex"));
        if (after_bytelevel)
            problem(h, "pre_tokenizer: a second ByteLevel is not supported");
        if (bool_or(h, item, "add_prefix_space", 0, "pre_tokenizer ByteLevel"))
            problem(h, "ByteLevel add_prefix_space=true is not supported: it adds a space to the text, so decode "
                       "could not give back the input exactly");
        /* trim_offsets only moves offsets, which fabula does not produce. */
        bool_or(h, item, "trim_offsets", 1, "pre_tokenizer ByteLevel");
        if (bool_or(h, item, "use_regex", 1, "pre_tokenizer ByteLevel"))
            add_split(h, p, PRETOK_GPT2_PATTERN, 0, PRETOK_ISOLATED, 0, 0);
        return 1;
    }
    if (!strcmp(type, "Split")) {
        known_keys(h, item, "pre_tokenizer Split", KEYS("type", "pattern", "behavior", "invert"));
        json_t *pat = json_object_get(item, "pattern");
        json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        int invert = bool_or(h, item, "invert", 0, "pre_tokenizer Split");
        if (!json_is_string(re) && !json_is_string(lit)) {
            problem(h, "Split pre_tokenizer needs \"pattern\": {\"Regex\": ...} or {\"String\": ...}");
            read_behavior(h, item, "Split", "?", &b);
        } else if (read_behavior(h, item, "Split", "?", &b)) {
            add_split(h, p, json_is_string(re) ? json_string_value(re) : json_string_value(lit), !json_is_string(re),
                      b, invert, after_bytelevel);
        }
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        known_keys(h, item, "pre_tokenizer Digits", KEYS("type", "individual_digits"));
        /* Hugging Face splits on char::is_numeric (categories Nd, Nl, No). */
        int individual = bool_or(h, item, "individual_digits", 0, "pre_tokenizer Digits");
        add_split(h, p, individual ? "\\p{N}" : "\\p{N}+", 0, PRETOK_ISOLATED, 0, after_bytelevel);
        return 0;
    }
    if (!strcmp(type, "Punctuation")) {
        known_keys(h, item, "pre_tokenizer Punctuation", KEYS("type", "behavior"));
        /* Hugging Face's is_punc: ASCII punctuation (which includes symbols
         * such as $ + < = > ^ ` | ~) or a Unicode P* category; one character
         * per match, as its per-character split. */
        if (read_behavior(h, item, "Punctuation", "Isolated", &b))
            add_split(h, p, "[\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}]", 0, b, 0,
                      after_bytelevel);
        return 0;
    }
    problem(h, "pre_tokenizer \"%s\" is not supported (byte-level BPE: ByteLevel, with Split, Digits, Punctuation "
               "in a Sequence)",
            type);
    return 0;
}

static pretok_t *read_pretok(hf_t *h, json_t *pt)
{
    pretok_t *p = pretok_new();
    if (!pt || json_is_null(pt)) {
        problem(h, "no pre_tokenizer: not a byte-level BPE tokenizer (ByteLevel is required)");
        return p;
    }
    int bytelevel = 0;
    if (!strcmp(str_or(json_object_get(pt, "type"), "?"), "Sequence")) {
        known_keys(h, pt, "pre_tokenizer Sequence", KEYS("type", "pretokenizers"));
        json_t *items = json_object_get(pt, "pretokenizers");
        if (!json_is_array(items))
            problem(h, "Sequence pre_tokenizer needs \"pretokenizers\": [...]");
        for (size_t i = 0; i < json_array_size(items); i++)
            bytelevel |= add_pretok_item(h, p, json_array_get(items, i), bytelevel);
    } else {
        bytelevel = add_pretok_item(h, p, pt, 0);
    }
    if (!bytelevel)
        problem(h, "the pre_tokenizer has no ByteLevel step: not a byte-level BPE tokenizer");
    return p;
}

/* The normalizer (possibly nested Sequences) into nz. */
static void read_normalizer(hf_t *h, json_t *n, normalizer_t *nz)
{
    const char *type = str_or(json_object_get(n, "type"), "?");
    char err[1024];
    if (!strcmp(type, "Sequence")) {
        known_keys(h, n, "normalizer Sequence", KEYS("type", "normalizers"));
        json_t *items = json_object_get(n, "normalizers");
        if (!json_is_array(items))
            problem(h, "Sequence normalizer needs \"normalizers\": [...]");
        for (size_t i = 0; i < json_array_size(items); i++)
            read_normalizer(h, json_array_get(items, i), nz);
    } else if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
        known_keys(h, n, "normalizer", KEYS("type"));
        normalizer_add_form(nz, !strcmp(type, "NFC")    ? NORM_NFC
                                : !strcmp(type, "NFD")  ? NORM_NFD
                                : !strcmp(type, "NFKC") ? NORM_NFKC
                                                        : NORM_NFKD);
    } else if (!strcmp(type, "Lowercase")) {
        known_keys(h, n, "normalizer Lowercase", KEYS("type"));
        normalizer_add_lowercase(nz);
    } else if (!strcmp(type, "StripAccents")) {
        known_keys(h, n, "normalizer StripAccents", KEYS("type"));
        normalizer_add_strip_accents(nz);
    } else if (!strcmp(type, "Strip")) {
        known_keys(h, n, "normalizer Strip", KEYS("type", "strip_left", "strip_right"));
        normalizer_add_strip(nz, bool_or(h, n, "strip_left", 1, "normalizer Strip"),
                             bool_or(h, n, "strip_right", 1, "normalizer Strip"));
    } else if (!strcmp(type, "Prepend")) {
        known_keys(h, n, "normalizer Prepend", KEYS("type", "prepend"));
        json_t *v = json_object_get(n, "prepend");
        if (!json_is_string(v))
            problem(h, "normalizer Prepend needs a string \"prepend\"");
        else
            normalizer_add_prepend(nz, json_string_value(v));
    } else if (!strcmp(type, "Replace")) {
        known_keys(h, n, "normalizer Replace", KEYS("type", "pattern", "content"));
        json_t *pat = json_object_get(n, "pattern"), *content = json_object_get(n, "content");
        json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        if ((!json_is_string(re) && !json_is_string(lit)) || !json_is_string(content)) {
            problem(h, "normalizer Replace needs \"pattern\": {\"Regex\": ...} or {\"String\": ...} and a string "
                       "\"content\"");
        } else {
            char *pcre = json_is_string(re) ? onig_to_pcre2(json_string_value(re)) : fb_strdup(json_string_value(lit));
            if (normalizer_add_replace(nz, pcre, !json_is_string(re), json_string_value(content), err, sizeof err))
                problem(h, "normalizer: %s", err);
            free(pcre);
        }
    } else if (!strcmp(type, "BertNormalizer")) {
        known_keys(h, n, "normalizer BertNormalizer",
                   KEYS("type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"));
        int lower = bool_or(h, n, "lowercase", 1, "normalizer BertNormalizer");
        /* strip_accents null (the default) follows lowercase, as in tokenizers. */
        normalizer_add_bert(nz, bool_or(h, n, "clean_text", 1, "normalizer BertNormalizer"),
                            bool_or(h, n, "handle_chinese_chars", 1, "normalizer BertNormalizer"),
                            bool_or(h, n, "strip_accents", lower, "normalizer BertNormalizer"), lower);
    } else {
        problem(h, "normalizer \"%s\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
                   "StripAccents, Replace, Prepend, BertNormalizer, Sequence)",
                type);
    }
}

static void check_model(hf_t *h, json_t *model)
{
    known_keys(h, model, "model",
               KEYS("type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                    "byte_fallback", "ignore_merges", "vocab", "merges"));
    json_t *type = json_object_get(model, "type");
    if (type && strcmp(str_or(type, "?"), "BPE"))
        problem(h, "model type \"%s\" is not supported (only byte-level BPE)", str_or(type, "?"));
    /* Old files (GPT-2's) have no "type": BPE is recognised by its merges. */
    if (!json_is_object(json_object_get(model, "vocab")) || !json_is_array(json_object_get(model, "merges")))
        problem(h, "model needs \"vocab\" (object) and \"merges\" (array): not a BPE model");
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        problem(h, "BPE dropout is not supported (it makes encoding random)");
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, affix[i]);
        if (v && !json_is_null(v) && (!json_is_string(v) || json_string_length(v) != 0))
            problem(h, "a non-empty \"%s\" is not byte-level BPE; not supported", affix[i]);
    }
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk))
        problem(h, "model \"unk_token\" must be a string or null");
    bool_or(h, model, "fuse_unk", 0, "model");
    bool_or(h, model, "byte_fallback", 0, "model");
}

/* Tokens are looked up NUL-terminated (jansson >= 2.10 has no length-aware
 * lookup); byte-level tokens never contain a 0 byte (it is 'Ā'). */
static int32_t vocab_id(hf_t *h, json_t *vocab, const char *tok, const char *what, size_t i)
{
    json_t *v = json_object_get(vocab, tok);
    if (!v) {
        problem(h, "merges[%zu]: %s \"%s\" is not in the vocab", i, what, tok);
        return -1;
    }
    return (int32_t)json_integer_value(v);
}

static void read_merges(hf_t *h, json_t *vocab, json_t *merges, bpe_t *bpe)
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
            if (!sp || strchr(sp + 1, ' ')) {
                problem(h, "merges[%zu] \"%s\" is not two tokens separated by one space", i, a);
                continue;
            }
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
            problem(h, "merges[%zu] must be \"a b\" or [\"a\", \"b\"]", i);
            continue;
        }
        if (na + nb + 2 > catcap)
            cat = fb_realloc(cat, catcap = 2 * (na + nb + 2));
        /* cat holds "a\0b\0" first, then "ab\0". */
        memcpy(cat, a, na);
        cat[na] = '\0';
        memcpy(cat + na + 1, b, nb);
        cat[na + 1 + nb] = '\0';
        int32_t l = vocab_id(h, vocab, cat, "token", i), r = vocab_id(h, vocab, cat + na + 1, "token", i);
        memmove(cat + na, cat + na + 1, nb + 1);
        int32_t res = vocab_id(h, vocab, cat, "merged token", i);
        if (l >= 0 && r >= 0 && res >= 0)
            bpe_add_merge(bpe, l, r, res);
    }
    free(cat);
}

/* The parts that do not change ids: implemented when they are what fabula
 * does anyway, otherwise said to be ignored, once. */
static void check_ignored(hf_t *h, json_t *root)
{
    json_t *tr = json_object_get(root, "truncation");
    if (tr && !json_is_null(tr)) {
        json_t *ml = json_object_get(tr, "max_length");
        if (json_is_integer(ml))
            fb_warn("%s: tokenizer.json sets truncation max_length %lld: ignored, fabula cuts windows itself",
                    h->path, (long long)json_integer_value(ml));
        else
            fb_warn("%s: tokenizer.json sets truncation: ignored, fabula cuts windows itself", h->path);
    }
    json_t *pad = json_object_get(root, "padding");
    if (pad && !json_is_null(pad))
        fb_warn("%s: tokenizer.json sets padding (to %s): ignored, fabula packs its windows itself", h->path,
                json_is_integer(json_object_get(json_object_get(pad, "strategy"), "Fixed")) ? "a fixed length"
                                                                                          : "the longest");
    /* A ByteLevel post-processor only moves offsets, a ByteLevel decoder is
     * fabula's decode: nothing to say for those. */
    json_t *pp = json_object_get(root, "post_processor");
    if (pp && !json_is_null(pp) && strcmp(str_or(json_object_get(pp, "type"), "?"), "ByteLevel"))
        fb_warn("%s: post_processor \"%s\" is not applied: fabula inserts its own special tokens", h->path,
                str_or(json_object_get(pp, "type"), "?"));
    json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec) && strcmp(str_or(json_object_get(dec, "type"), "?"), "ByteLevel"))
        fb_warn("%s: decoder \"%s\" is not applied: fabula decodes each token to its bytes (ByteLevel)", h->path,
                str_or(json_object_get(dec, "type"), "?"));
}

tokenizer_t *tokenizer_hf_from_json(const char *path, json_t *root)
{
    hf_t hh = {.path = path}, *h = &hh;
    known_keys(h, root, "tokenizer.json",
               KEYS("version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                    "post_processor", "decoder", "model"));
    json_t *model = json_object_get(root, "model");
    check_model(h, model);
    normalizer_t *nz = normalizer_new();
    json_t *jn = json_object_get(root, "normalizer");
    if (jn && !json_is_null(jn))
        read_normalizer(h, jn, nz);
    pretok_t *pretok = read_pretok(h, json_object_get(root, "pre_tokenizer"));
    json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        problem(h, "\"added_tokens\" must be an array");
    if (!json_is_array(added))
        added = NULL;

    /* Ids: the vocab's and the added tokens'; fabula's specials go after the
     * largest. The vocabulary runs from 0 to the largest id, so an id is
     * bounded by the file's own entries: one id of 10^9 in a small file
     * would otherwise size every per-id table (and a model's embedding) at
     * 10^9 rows. A file of N entries with ids 0..N-1 is what tokenizers
     * writes; it numbers tokens by count too (get_vocab_size() is the
     * number of entries, and it gives an added token the next id after the
     * vocab whatever id the file states). */
    const long long nvocab = (long long)json_object_size(vocab), nadded = (long long)json_array_size(added);
    const long long nentries = nvocab + nadded;
    long long maxid = -1;
    if (nentries >= INT32_MAX / 2)
        problem(h, "%lld entries: more than fabula's 32-bit token ids hold", nentries);
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0) {
            problem(h, "vocab[\"%s\"] must be a non-negative integer id", key);
            continue;
        }
        if (json_integer_value(val) >= nentries) {
            problem(h, "vocab[\"%s\"] has id %lld, not below the file's %lld entries (vocab %lld + added_tokens "
                       "%lld): ids must number the entries (tokenizers counts %lld tokens and has no token for the "
                       "ids between)",
                    key, (long long)json_integer_value(val), nentries, nvocab, nadded, nvocab);
            continue;
        }
        if (json_integer_value(val) > maxid)
            maxid = json_integer_value(val);
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || !json_is_string(content)) {
            problem(h, "added_tokens[%zu] needs an integer \"id\" and a string \"content\"", i);
            continue;
        }
        if (json_integer_value(id) >= nentries) {
            problem(h, "added_tokens[%zu] \"%s\" has id %lld, not below the file's %lld entries (vocab %lld + "
                       "added_tokens %lld): ids must number the entries (tokenizers ignores that id and gives the "
                       "token the next one after its vocab)",
                    i, json_string_value(content), (long long)json_integer_value(id), nentries, nvocab, nadded);
            continue;
        }
        if (json_integer_value(id) > maxid)
            maxid = json_integer_value(id);
    }
    fail_if_problems(h);
    tokenizer_t *t = tokenizer_alloc(TOKENIZER_HF, path, (int32_t)(maxid + 1));
    t->pretok = pretok;
    if (normalizer_nsteps(nz) > 0) {
        t->norm = nz;
        t->lossy = 1;
    } else {
        normalizer_free(nz);
    }

    /* Vocab entries as bytes. A byte-level string decodes to its bytes;
     * anything else keeps its UTF-8 (Hugging Face's ByteLevel decoder does
     * the same), is flagged raw and can never come out of encode. */
    int ignore_merges = bool_or(h, model, "ignore_merges", 0, "model");
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
        if (t->flags[id] & TOKF_PRESENT) {
            problem(h, "vocab id %d is given to two tokens", (int)id);
            continue;
        }
        if (klen > bufcap)
            buf = fb_realloc(buf, bufcap = 2 * klen);
        long n = bytelevel_decode(key, klen, buf);
        if (n < 0) {
            tokenizer_set_token(t, id, (const uint8_t *)key, klen, TOKF_RAW);
            continue;
        }
        tokenizer_set_token(t, id, buf, (size_t)n, 0);
        if (whole && n > 0) {
            uint64_t hs = bytemap_hash(buf, (size_t)n);
            int inserted;
            uint64_t *v = bytemap_insert(whole, buf, (size_t)n, hs, &inserted);
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

    /* A byte whose character is not in the vocab: tokenizers' BPE drops it
     * from the word, or emits unk_token when there is one (checked with the
     * Python package: Falcon's vocab lacks 28 bytes and drops them). */
    int32_t base[256];
    int nmissing = 0;
    char missing[256 * 5 + 1] = "";
    for (int b = 0; b < 256; b++) {
        char ch[3] = {0};
        bytelevel_char_utf8((uint8_t)b, ch);
        json_t *v = json_object_get(vocab, ch);
        base[b] = v ? (int32_t)json_integer_value(v) : -1;
        if (!v)
            sprintf(missing + 5 * nmissing++, " 0x%02X", b);
    }
    t->bpe = bpe_new(base);
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        json_t *uid = json_object_get(vocab, json_string_value(unk));
        if (!uid)
            problem(h, "model unk_token \"%s\" is not in the vocab", json_string_value(unk));
        else
            bpe_set_unk(t->bpe, (int32_t)json_integer_value(uid), bool_or(h, model, "fuse_unk", 0, "model"));
    }
    if (nmissing) {
        t->lossy = 1;
        if (bool_or(h, model, "byte_fallback", 0, "model"))
            problem(h, "byte_fallback with bytes missing from the vocab (%s) is not supported", missing + 1);
        else if (!json_is_string(unk))
            fb_warn("%s: the vocab has no token for %d bytes (%s): dropped from the text, as tokenizers does "
                    "(no unk_token)",
                    path, nmissing, missing + 1);
        else
            fb_warn("%s: the vocab has no token for %d bytes (%s): encoded as unk_token \"%s\", as tokenizers does",
                    path, nmissing, missing + 1, json_string_value(unk));
    }
    read_merges(h, vocab, json_object_get(model, "merges"), t->bpe);
    if (whole)
        bpe_set_whole_words(t->bpe, whole);
    fail_if_problems(h);
    check_ignored(h, root);

    int32_t next = t->vocab_size;
    for (int k = 0; k < TOKENIZER_NSPECIAL; k++)
        if (tokenizer_special(t, tokenizer_fabula_special_name(k)) < 0) {
            tokenizer_grow(t, next + 1);
            tokenizer_add_special(t, tokenizer_fabula_special_name(k), next++);
        }
    tokenizer_compute_digest(t);
    return t;
}
