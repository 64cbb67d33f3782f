#include "tokenizer/tokenizer_match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/data_path.h"
#include "io/h5tensor.h"
#include "util/error.h"

/* The first difference between two vocabularies, in `why`; 0 when they
 * give every id the same bytes and the same special tokens. */
static int vocab_differs(const tokenizer_t *a, const tokenizer_t *b, char *why, size_t n)
{
    const int va = tokenizer_vocab_size(a), vb = tokenizer_vocab_size(b);
    if (va != vb) {
        snprintf(why, n, "vocabulary %d against %d", va, vb);
        return 1;
    }
    for (int32_t id = 0; id < va; id++) {
        size_t la, lb;
        const uint8_t *ba = tokenizer_token_bytes(a, id, &la), *bb = tokenizer_token_bytes(b, id, &lb);
        if (!ba != !bb || la != lb || (ba && memcmp(ba, bb, la) != 0)) {
            snprintf(why, n, "id %d is another token", (int)id);
            return 1;
        }
    }
    for (int i = 0; i < tokenizer_nspecial(a); i++) {
        int32_t id;
        const char *text = tokenizer_special_at(a, i, &id);
        if (tokenizer_special(b, text) != id) {
            snprintf(why, n, "special token %s is id %d against %d", text, (int)id, (int)tokenizer_special(b, text));
            return 1;
        }
    }
    return 0;
}

/* The trained tokenizer, when it can be read from here (NULL otherwise). */
static tokenizer_t *load_trained(const char *trained)
{
    if (!trained || !*trained)
        return NULL;
    if (strcmp(trained, "bytes") != 0) {
        char *path = data_path_resolve(trained);
        const int readable = access(path, R_OK) == 0;
        free(path);
        if (!readable)
            return NULL;
    }
    return tokenizer_load(trained);
}

/* The corpus's record of its tokenizer: 1 with *digest, *kind (new
 * strings) and *vocab filled, 0 when there is no readable corpus. */
static int corpus_record(const char *corpus, char **digest, char **kind, int *vocab)
{
    if (!corpus || !*corpus || access(corpus, R_OK) != 0)
        return 0;
    hid_t f = h5_open_read(corpus);
    *digest = h5_read_attr_string(f, "tokenizer_digest");
    *kind = h5_read_attr_string(f, "tokenizer_kind");
    *vocab = (int)h5_read_attr_i64(f, "vocab_size");
    h5_close(f);
    return 1;
}

void tokenizer_check_match(const char *ckpt, const char *trained, const char *corpus, const tokenizer_t *tok,
                           const char *spec)
{
    char why[256];
    tokenizer_t *ref = load_trained(trained);
    if (ref) {
        const int differs = vocab_differs(ref, tok, why, sizeof why);
        if (differs)
            fb_fatal(FB_EXIT_DATA, "--tokenizer %s (%s, vocabulary %d, sha256 %.12s...) is not the tokenizer %s was "
                     "trained with, data.tokenizer = %s (%s, vocabulary %d, sha256 %.12s...): %s, so the model's "
                     "ids would be read as other text; give that tokenizer (or leave --tokenizer out)",
                     spec, tokenizer_kind(tok), tokenizer_vocab_size(tok), tokenizer_digest(tok), ckpt, trained,
                     tokenizer_kind(ref), tokenizer_vocab_size(ref), tokenizer_digest(ref), why);
        tokenizer_free(ref);
        return;
    }
    char *digest = NULL, *kind = NULL;
    int vocab = 0;
    if (!corpus_record(corpus, &digest, &kind, &vocab)) {
        fb_warn("--tokenizer %s: cannot check that it is the tokenizer %s was trained with: neither its "
                "data.tokenizer (%s) nor its data.corpus (%s) can be read from here",
                spec, ckpt, trained && *trained ? trained : "none", corpus && *corpus ? corpus : "none");
        return;
    }
    /* the same content hashes alike; another kind of file with the same
     * vocabulary size (a tokenizer.json exported from it) cannot be told
     * apart by the record alone */
    const int same = !strcmp(digest, tokenizer_digest(tok));
    const int other_kind = strcmp(kind, tokenizer_kind(tok)) != 0;
    if (!same && (vocab != tokenizer_vocab_size(tok) || !other_kind))
        fb_fatal(FB_EXIT_DATA, "--tokenizer %s (%s, vocabulary %d, sha256 %.12s...) is not the tokenizer %s was "
                 "trained with: its corpus %s was made with a %s tokenizer of vocabulary %d, sha256 %.12s..., so the "
                 "model's ids would be read as other text; give that tokenizer",
                 spec, tokenizer_kind(tok), tokenizer_vocab_size(tok), tokenizer_digest(tok), ckpt, corpus, kind,
                 vocab, digest);
    if (!same)
        fb_warn("--tokenizer %s: %s was trained on %s, made with a %s tokenizer (sha256 %.12s...); this %s one has "
                "the same vocabulary size but cannot be compared further (its data.tokenizer %s cannot be read)",
                spec, ckpt, corpus, kind, digest, tokenizer_kind(tok), trained);
    free(digest);
    free(kind);
}
