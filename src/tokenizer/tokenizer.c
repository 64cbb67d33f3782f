/* The tokenizer interface: the common object, the built-in "bytes" kind,
 * loading by content, encode (with a per-thread pre-token cache), decode and
 * the digest. The file kinds are read by tokenizer_fabula.c and
 * tokenizer_hf.c. */
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytetok.h"
#include "io/data_path.h"
#include "io/regular_file.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/strbuf.h"

/* ------------------------------------------------------------ building */

static atomic_uint_fast64_t next_serial = 1;

const char *tokenizer_fabula_special_name(int i)
{
    FB_ASSERT(i >= 0 && i < TOKENIZER_NSPECIAL);
    return bytetok_token_name(256 + i);
}

tokenizer_t *tokenizer_alloc(int kind, const char *source, int32_t vocab_size)
{
    tokenizer_t *t = fb_calloc(1, sizeof *t);
    t->kind = kind;
    t->source = fb_strdup(source);
    t->serial = atomic_fetch_add(&next_serial, 1);
    tokenizer_grow(t, vocab_size);
    return t;
}

void tokenizer_grow(tokenizer_t *t, int32_t vocab_size)
{
    FB_ASSERT(vocab_size >= t->vocab_size);
    size_t n = (size_t)vocab_size;
    t->flags = fb_realloc(t->flags, n ? n : 1);
    t->off = fb_realloc(t->off, (n ? n : 1) * sizeof *t->off);
    t->len = fb_realloc(t->len, (n ? n : 1) * sizeof *t->len);
    for (size_t i = (size_t)t->vocab_size; i < n; i++) {
        t->flags[i] = 0;
        t->off[i] = 0;
        t->len[i] = 0;
    }
    t->vocab_size = vocab_size;
}

void tokenizer_set_token(tokenizer_t *t, int32_t id, const uint8_t *bytes, size_t n, int flags)
{
    FB_ASSERT(id >= 0 && id < t->vocab_size && n <= UINT32_MAX);
    if (t->bytes_len + n > t->bytes_cap) {
        size_t cap = t->bytes_cap ? t->bytes_cap : 1 << 16;
        while (cap < t->bytes_len + n)
            cap *= 2;
        t->bytes = fb_realloc(t->bytes, cap);
        t->bytes_cap = cap;
    }
    if (n)
        memcpy(t->bytes + t->bytes_len, bytes, n);
    t->off[id] = t->bytes_len;
    t->len[id] = (uint32_t)n;
    t->bytes_len += n;
    t->flags[id] = (uint8_t)(flags | TOKF_PRESENT);
}

void tokenizer_add_special(tokenizer_t *t, const char *text, int32_t id)
{
    tokenizer_set_token(t, id, (const uint8_t *)text, strlen(text), TOKF_SPECIAL);
    t->special_text = fb_realloc(t->special_text, (size_t)(t->nspecial + 1) * sizeof *t->special_text);
    t->special_id = fb_realloc(t->special_id, (size_t)(t->nspecial + 1) * sizeof *t->special_id);
    t->special_text[t->nspecial] = fb_strdup(text);
    t->special_id[t->nspecial] = id;
    t->nspecial++;
}

/* ------------------------------------------------------------ canonical form and digest */

static const char *kind_names[] = {"bytes", "fabula-bpe", "hf-bpe"};

char *tokenizer_canonical(const tokenizer_t *t, size_t *n)
{
    static const char hex[] = "0123456789abcdef";
    strbuf_t b = {0};
    sb_printf(&b, "fabula-tokenizer-canonical 1\nkind %s\n", kind_names[t->kind]);
    /* Lines for what older tokenizers never have (a normalizer, byte-level
     * splits, an unknown token) only appear when used, so their digests stay. */
    if (t->norm) {
        char *d = normalizer_describe(t->norm);
        sb_printf(&b, "normalizer %d\n", normalizer_nsteps(t->norm));
        sb_add(&b, d, strlen(d));
        free(d);
    }
    int nsteps = t->pretok ? pretok_nsteps(t->pretok) : 0;
    sb_printf(&b, "pre_tokenizer %d\n", nsteps);
    for (int i = 0; i < nsteps; i++) {
        const char *pat;
        int literal, invert;
        pretok_behavior_t beh;
        pretok_step_get(t->pretok, i, &pat, &literal, &beh, &invert);
        sb_printf(&b, "split %s literal=%d invert=%d%s %zu:", pretok_behavior_name(beh), literal, invert,
                  pretok_step_bytelevel(t->pretok, i) ? " bytelevel=1" : "", strlen(pat));
        sb_add(&b, pat, strlen(pat));
        sb_add(&b, "\n", 1);
    }
    sb_printf(&b, "ignore_merges %d\n", t->bpe && bpe_has_whole_words(t->bpe));
    int fuse = 0;
    if (t->bpe && bpe_unk(t->bpe, &fuse) >= 0)
        sb_printf(&b, "unk %d fuse=%d\n", (int)bpe_unk(t->bpe, &fuse), fuse);
    sb_printf(&b, "vocab %d\n", (int)t->vocab_size);
    for (int32_t id = 0; id < t->vocab_size; id++) {
        uint8_t f = t->flags[id];
        char kind = !(f & TOKF_PRESENT) ? '-' : (f & TOKF_SPECIAL) ? 's' : (f & TOKF_RAW) ? 'r' : 'b';
        sb_printf(&b, "%d %c ", (int)id, kind);
        for (uint32_t i = 0; i < t->len[id]; i++) {
            uint8_t c = t->bytes[t->off[id] + i];
            char h[2] = {hex[c >> 4], hex[c & 15]};
            sb_add(&b, h, 2);
        }
        sb_add(&b, "\n", 1);
    }
    size_t nm = t->bpe ? bpe_nmerges(t->bpe) : 0;
    sb_printf(&b, "merges %zu\n", nm);
    for (size_t i = 0; i < nm; i++) {
        int32_t l, r, res;
        bpe_merge_get(t->bpe, i, &l, &r, &res);
        sb_printf(&b, "%d %d %d\n", (int)l, (int)r, (int)res);
    }
    *n = b.n;
    return b.s;
}

void tokenizer_compute_digest(tokenizer_t *t)
{
    size_t n;
    char *c = tokenizer_canonical(t, &n);
    sha256_hex(c, n, t->digest);
    free(c);
}

/* ------------------------------------------------------------ loading */

static tokenizer_t *bytes_tokenizer(void)
{
    tokenizer_t *t = tokenizer_alloc(TOKENIZER_BYTES, "bytes", BYTETOK_VOCAB);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        tokenizer_set_token(t, b, &c, 1, 0);
    }
    for (int i = 0; i < TOKENIZER_NSPECIAL; i++)
        tokenizer_add_special(t, tokenizer_fabula_special_name(i), 256 + i);
    tokenizer_compute_digest(t);
    return t;
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot open tokenizer %s: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    size_t cap = 1 << 16, len = 0;
    char *buf = fb_malloc(cap);
    for (;;) {
        if (len == cap)
            buf = fb_realloc(buf, cap *= 2);
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                fb_fatal(FB_EXIT_IO, "cannot read tokenizer %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

tokenizer_t *tokenizer_load(const char *spec)
{
    if (!strcmp(spec, "bytes"))
        return bytes_tokenizer();
    char *path = data_path_resolve(spec);
    size_t n;
    char *text = read_file(path, &n);
    json_error_t err;
    json_t *root = json_loadb(text, n, 0, &err);
    free(text);
    if (!root)
        fb_fatal(FB_EXIT_DATA, "%s:%d:%d: not a tokenizer file: %s", path, err.line, err.column, err.text);
    tokenizer_t *t = NULL;
    json_t *format = json_object_get(root, "format");
    if (json_is_object(root) && json_is_string(format) && !strcmp(json_string_value(format), "fabula-tokenizer"))
        t = tokenizer_fabula_from_json(path, root);
    else if (json_is_object(root) && json_is_object(json_object_get(root, "model")))
        t = tokenizer_hf_from_json(path, root);
    else
        fb_fatal(FB_EXIT_DATA,
                 "%s: neither a fabula tokenizer file (\"format\": \"fabula-tokenizer\") nor a Hugging Face "
                 "tokenizer.json (an object with \"model\")",
                 path);
    json_decref(root);
    free(path);
    return t;
}

/* ------------------------------------------------------------ per-thread encode state */

/* Words up to this many bytes are cached (Hugging Face caches words under
 * 256 characters); longer ones are rare and mostly unique. */
#define CACHE_MAX_WORD 256
/* A cache past these sizes is emptied and refilled. */
#define CACHE_MAX_ENTRIES (1u << 20)
#define CACHE_MAX_IDS (16u << 20)
#define TLS_SLOTS 4

typedef struct tok_ctx {
    _Atomic uint64_t serial; /* 0 = unused slot */
    pretok_scratch_t *scr;
    bpe_work_t *work;
    bytemap_t cache;         /* word -> (offset in ids << 24 | count) */
    int32_t *ids;
    size_t nids, capids;
    uint64_t last_use;
} tok_ctx_t;

/* One per thread that has encoded. All of them are listed, so that
 * tokenizer_free can release every thread's state for that tokenizer. */
typedef struct tok_tls {
    tok_ctx_t slot[TLS_SLOTS];
    uint64_t clock;
    pthread_mutex_t lock;    /* taken by the owner to change slots, by tokenizer_free to release them */
    struct tok_tls *prev, *next;
} tok_tls_t;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tok_tls_t *registry;

static void ctx_release(tok_ctx_t *c)
{
    pretok_scratch_free(c->scr);
    bpe_work_free(c->work);
    bytemap_free(&c->cache);
    free(c->ids);
    c->scr = NULL;
    c->work = NULL;
    c->ids = NULL;
    c->nids = c->capids = 0;
    c->last_use = 0;
    atomic_store(&c->serial, 0);
}

static void tls_destroy(void *p)
{
    tok_tls_t *tls = p;
    pthread_mutex_lock(&registry_lock);
    if (tls->prev)
        tls->prev->next = tls->next;
    else
        registry = tls->next;
    if (tls->next)
        tls->next->prev = tls->prev;
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < TLS_SLOTS; i++)
        if (atomic_load(&tls->slot[i].serial))
            ctx_release(&tls->slot[i]);
    pthread_mutex_destroy(&tls->lock);
    free(tls);
}

static void tls_key_create(void)
{
    if (pthread_key_create(&tls_key, tls_destroy) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "pthread_key_create failed");
}

/* This thread's state for tokenizer t: each thread keeps its own cache for
 * up to TLS_SLOTS tokenizers, so encoding takes no lock once warm. */
static tok_ctx_t *thread_ctx(const tokenizer_t *t)
{
    pthread_once(&tls_once, tls_key_create);
    tok_tls_t *tls = pthread_getspecific(tls_key);
    if (!tls) {
        tls = fb_calloc(1, sizeof *tls);
        pthread_mutex_init(&tls->lock, NULL);
        if (pthread_setspecific(tls_key, tls) != 0)
            fb_fatal(FB_EXIT_INTERNAL, "pthread_setspecific failed");
        pthread_mutex_lock(&registry_lock);
        tls->next = registry;
        if (registry)
            registry->prev = tls;
        registry = tls;
        pthread_mutex_unlock(&registry_lock);
    }
    tls->clock++;
    for (int i = 0; i < TLS_SLOTS; i++)
        if (atomic_load_explicit(&tls->slot[i].serial, memory_order_acquire) == t->serial) {
            tls->slot[i].last_use = tls->clock;
            return &tls->slot[i];
        }
    pthread_mutex_lock(&tls->lock);
    tok_ctx_t *victim = &tls->slot[0];
    for (int i = 1; i < TLS_SLOTS; i++)
        if (tls->slot[i].last_use < victim->last_use)
            victim = &tls->slot[i];
    if (atomic_load(&victim->serial))
        ctx_release(victim);
    victim->scr = pretok_scratch_new();
    victim->work = bpe_work_new();
    bytemap_init(&victim->cache);
    victim->last_use = tls->clock;
    atomic_store_explicit(&victim->serial, t->serial, memory_order_release);
    pthread_mutex_unlock(&tls->lock);
    return victim;
}

/* Releases every thread's state for t. Freeing a tokenizer while another
 * thread still encodes with it is a bug of the caller, so no slot of t can
 * be in use here; slots of other tokenizers are left alone. */
static void thread_ctx_forget(const tokenizer_t *t)
{
    pthread_mutex_lock(&registry_lock);
    for (tok_tls_t *tls = registry; tls; tls = tls->next) {
        pthread_mutex_lock(&tls->lock);
        for (int i = 0; i < TLS_SLOTS; i++)
            if (atomic_load(&tls->slot[i].serial) == t->serial)
                ctx_release(&tls->slot[i]);
        pthread_mutex_unlock(&tls->lock);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ------------------------------------------------------------ encode / decode */

typedef struct enc_state {
    const tokenizer_t *t;
    tok_ctx_t *c;
    token_vec_t *out;
} enc_state_t;

static void encode_piece(void *p, const uint8_t *s, size_t n)
{
    enc_state_t *st = p;
    tok_ctx_t *c = st->c;
    token_vec_t *out = st->out;
    if (n > CACHE_MAX_WORD) {
        bpe_encode_word(st->t->bpe, c->work, s, n, out);
        return;
    }
    uint64_t h = bytemap_hash(s, n);
    uint64_t *v = bytemap_find(&c->cache, s, n, h);
    if (v) {
        size_t off = (size_t)(*v >> 24), cnt = (size_t)(*v & 0xffffff);
        token_vec_reserve(out, cnt);
        memcpy(out->ids + out->n, c->ids + off, cnt * sizeof *out->ids);
        out->n += cnt;
        return;
    }
    size_t before = out->n;
    bpe_encode_word(st->t->bpe, c->work, s, n, out);
    size_t cnt = out->n - before;
    if (c->cache.n >= CACHE_MAX_ENTRIES || c->nids + cnt > CACHE_MAX_IDS) {
        bytemap_clear(&c->cache);
        c->nids = 0;
    }
    if (c->nids + cnt > c->capids) {
        c->capids = c->capids ? 2 * c->capids : 1 << 16;
        c->ids = fb_realloc(c->ids, c->capids * sizeof *c->ids);
    }
    memcpy(c->ids + c->nids, out->ids + before, cnt * sizeof *c->ids);
    *bytemap_insert(&c->cache, s, n, h, NULL) = (uint64_t)c->nids << 24 | cnt;
    c->nids += cnt;
}

void tokenizer_encode(const tokenizer_t *t, const uint8_t *text, size_t n, token_vec_t *out)
{
    if (t->kind == TOKENIZER_BYTES) {
        token_vec_reserve(out, n);
        bytetok_encode(text, n, out->ids + out->n);
        out->n += n;
        return;
    }
    enc_state_t st = {t, thread_ctx(t), out};
    /* Roughly 1 token per 3 bytes on novels: one reservation up front. */
    token_vec_reserve(out, n / 3 + 16);
    if (t->norm) {
        size_t m;
        uint8_t *norm = normalizer_apply(t->norm, text, n, &m);
        pretok_split(t->pretok, st.c->scr, norm, m, encode_piece, &st);
        free(norm);
        return;
    }
    pretok_split(t->pretok, st.c->scr, text, n, encode_piece, &st);
}

int tokenizer_is_lossy(const tokenizer_t *t) { return t->lossy; }

uint8_t *tokenizer_expected_text(const tokenizer_t *t, const uint8_t *text, size_t n, size_t *len)
{
    size_t m = n;
    uint8_t *x = t->norm ? normalizer_apply(t->norm, text, n, &m) : NULL;
    if (!x) {
        x = fb_malloc(n + 1);
        memcpy(x, text, n);
    }
    if (!t->bpe) {
        *len = m;
        return x;
    }
    int fuse;
    int32_t unk = bpe_unk(t->bpe, &fuse);
    size_t ulen = 0;
    const uint8_t *ubytes = unk >= 0 ? tokenizer_token_bytes(t, unk, &ulen) : NULL;
    strbuf_t b = {0};
    sb_add(&b, "", 0);
    int in_run = 0;
    for (size_t i = 0; i < m; i++) {
        if (bpe_base(t->bpe, x[i]) >= 0) {
            sb_add(&b, x + i, 1);
            in_run = 0;
        } else if (ubytes && !(in_run && fuse)) {
            sb_add(&b, ubytes, ulen);
            in_run = 1;
        }
    }
    free(x);
    *len = b.n;
    return (uint8_t *)b.s;
}

uint8_t *tokenizer_decode(const tokenizer_t *t, const int32_t *ids, size_t n, size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ids[i] >= 0 && ids[i] < t->vocab_size && (t->flags[ids[i]] & TOKF_PRESENT) ? t->len[ids[i]] : 24;
    uint8_t *out = fb_malloc(total + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id >= 0 && id < t->vocab_size && (t->flags[id] & TOKF_PRESENT)) {
            memcpy(out + m, t->bytes + t->off[id], t->len[id]);
            m += t->len[id];
        } else {
            m += (size_t)snprintf((char *)out + m, 24, "<|id_%d|>", (int)id);
        }
    }
    out[m] = '\0';
    *len = m;
    return out;
}

/* ------------------------------------------------------------ accessors */

void tokenizer_free(tokenizer_t *t)
{
    if (!t)
        return;
    thread_ctx_forget(t);
    pretok_free(t->pretok);
    normalizer_free(t->norm);
    bpe_free(t->bpe);
    for (int i = 0; i < t->nspecial; i++)
        free(t->special_text[i]);
    free(t->special_text);
    free(t->special_id);
    free(t->flags);
    free(t->off);
    free(t->len);
    free(t->bytes);
    free(t->source);
    free(t);
}

int tokenizer_vocab_size(const tokenizer_t *t) { return (int)t->vocab_size; }
const char *tokenizer_digest(const tokenizer_t *t) { return t->digest; }
const char *tokenizer_kind(const tokenizer_t *t) { return kind_names[t->kind]; }

int32_t tokenizer_special(const tokenizer_t *t, const char *text)
{
    for (int i = 0; i < t->nspecial; i++)
        if (!strcmp(t->special_text[i], text))
            return t->special_id[i];
    return -1;
}

int tokenizer_nspecial(const tokenizer_t *t) { return t->nspecial; }

const char *tokenizer_special_at(const tokenizer_t *t, int i, int32_t *id)
{
    FB_ASSERT(i >= 0 && i < t->nspecial);
    *id = t->special_id[i];
    return t->special_text[i];
}

const uint8_t *tokenizer_token_bytes(const tokenizer_t *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->vocab_size || !(t->flags[id] & TOKF_PRESENT))
        return NULL;
    *len = t->len[id];
    return t->bytes + t->off[id];
}

const char *tokenizer_source(const tokenizer_t *t) { return t->source; }
