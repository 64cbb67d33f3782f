/* Tokenizers: SHA-256 against the FIPS 180 vectors and sha256sum; the
 * byte-level table; pre-token splits; BPE against a naive re-implementation
 * (encode and training); round trips of random bytes (invalid UTF-8 too) and
 * of the sample novels for the three kinds; special ids; digests; refused
 * files and their exit codes (in forked children).
 *
 * Expected values come from the published FIPS 180 test vectors, from
 * sha256sum, from the naive encoders/trainers written here, and from the
 * rules of docs/tokenizer.md. Files are written in the current directory. */
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_train.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/bytetok.h"
#include "corpus/novels.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fabula.h"
#include "tokenizer/tokenizer_internal.h"
#include "testlib.h"
#include "util/error.h"
#include "util/sha256.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static char sample_path[4096];

/* ------------------------------------------------------------ SHA-256 */

static void sha256sum_of(const char *path, char out[65])
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (!p || fscanf(p, "%64s", out) != 1)
        out[0] = '\0';
    if (p)
        pclose(p);
}

static void test_sha256(void)
{
    /* FIPS 180-2 appendix B / NIST CSRC examples. */
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
         "nopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        sha256_hex(v[i].msg, strlen(v[i].msg), hex);
        EXPECT(!strcmp(hex, v[i].hex), "FIPS vector %zu: %s", i, hex);
    }
    sha256_ctx_t c;
    uint8_t d[32], a[1000];
    memset(a, 'a', sizeof a);
    sha256_init(&c);
    for (int i = 0; i < 1000; i++)
        sha256_update(&c, a, sizeof a);
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    EXPECT(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "one million 'a': %s",
           hex);

    /* Random lengths around the block size, fed in random pieces, against sha256sum. */
    int agree = 0, tried = 0;
    for (int len = 0; len < 300; len += 1 + (int)(rnd() % 13)) {
        uint8_t buf[300];
        for (int i = 0; i < len; i++)
            buf[i] = (uint8_t)rnd();
        write_file("tok_sha.bin", buf, (size_t)len);
        char ref[65];
        sha256sum_of("tok_sha.bin", ref);
        if (!ref[0])
            break; /* no sha256sum: the vectors above still count */
        sha256_init(&c);
        for (int off = 0; off < len;) {
            int k = 1 + (int)(rnd() % 70);
            if (k > len - off)
                k = len - off;
            sha256_update(&c, buf + off, (size_t)k);
            off += k;
        }
        sha256_final(&c, d);
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", d[i]);
        tried++;
        agree += !strcmp(hex, ref);
    }
    EXPECT(agree == tried, "%d of %d random messages agree with sha256sum", agree, tried);
    printf("sha256: FIPS vectors, 10^6 'a', %d random messages vs sha256sum\n", tried);
    unlink("tok_sha.bin");
}

/* ------------------------------------------------------------ byte-level table */

static void test_bytelevel(void)
{
    int seen[512] = {0}, ok = 1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = bytelevel_char((uint8_t)b);
        ok &= cp < 512 && !seen[cp] && bytelevel_byte(cp) == b;
        if (cp < 512)
            seen[cp] = 1;
        /* GPT-2's rule: printable Latin-1 stands for itself. */
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        ok &= printable ? cp == (uint32_t)b : cp >= 256;
    }
    EXPECT(ok, "bytes_to_unicode is a bijection with printable bytes fixed");
    EXPECT(bytelevel_char(' ') == 0x120 && bytelevel_char('\n') == 0x10A, "space is U+0120, newline U+010A");
    uint8_t out[8];
    EXPECT(bytelevel_decode("\xc4\xa0hi", 4, out) == 3 && !memcmp(out, " hi", 3), "'Ġhi' decodes to ' hi'");
    EXPECT(bytelevel_decode("\xe4\xb8\xad", 3, out) == -1, "a CJK character is not byte-level text");
}

/* ------------------------------------------------------------ pre-tokenizer */

typedef struct pieces {
    char buf[4096];
    size_t n;
    int count;
} pieces_t;

static void collect(void *ctx, const uint8_t *s, size_t n)
{
    pieces_t *p = ctx;
    if (p->n + n + 2 < sizeof p->buf) {
        memcpy(p->buf + p->n, s, n);
        p->n += n;
        p->buf[p->n++] = '|';
        p->buf[p->n] = '\0';
    }
    p->count++;
}

static void expect_split(const pretok_t *pt, pretok_scratch_t *s, const char *text, const char *want)
{
    pieces_t p = {.n = 0};
    pretok_split(pt, s, (const uint8_t *)text, strlen(text), collect, &p);
    EXPECT(!strcmp(p.buf, want), "split of \"%s\": got \"%s\", want \"%s\"", text, p.buf, want);
}

typedef struct tile {
    const uint8_t *base, *next;
    int ok;
} tile_t;

static void tile_check(void *ctx, const uint8_t *s, size_t n)
{
    tile_t *t = ctx;
    t->ok &= s == t->next && n > 0;
    t->next = s + n;
}

static void test_pretok(void)
{
    pretok_t *fab = pretok_new(), *gpt = pretok_new();
    char err[256];
    EXPECT(pretok_add_split(fab, PRETOK_FABULA_PATTERN, 0, PRETOK_ISOLATED, 0, err, sizeof err) == 0, "%s", err);
    EXPECT(pretok_add_split(gpt, PRETOK_GPT2_PATTERN, 0, PRETOK_ISOLATED, 0, err, sizeof err) == 0, "%s", err);
    pretok_scratch_t *s = pretok_scratch_new();
    /* The rules of docs/tokenizer.md, one by one. */
    expect_split(fab, s, "He said, \"don't\" 12345 times.", "He| said|,| \"|don|'t|\"| |123|45| times|.|");
    expect_split(fab, s, "I\xe2\x80\x99ll go", "I|\xe2\x80\x99ll| go|");
    expect_split(fab, s, "\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82\n\n\xe4\xb8\xad", /* 你好。\n\n中 */
                 "\xe4\xbd\xa0|\xe5\xa5\xbd|\xe3\x80\x82\n\n|\xe4\xb8\xad|");
    expect_split(fab, s, "a  b\n", "a| |" " b|\n|");
    expect_split(gpt, s, "Hello  world's 42!", "Hello| | world|'s| 42|!|");
    /* Invalid bytes never match, yet stay in the output as their own piece. */
    expect_split(gpt, s, "ab\xff\xfe" "cd", "ab|\xff\xfe|cd|");
    expect_split(fab, s, "x\x80y", "x|\x80|y|");

    int tiled = 1;
    for (int trial = 0; trial < 300; trial++) {
        uint8_t buf[512];
        size_t n = rnd() % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd();
            /* Mix ASCII, spaces, newlines, UTF-8 lead/continuation bytes and junk. */
            buf[i] = (r & 3) == 0 ? (uint8_t)(' ' + (r >> 8) % 95) : (r & 3) == 1 ? " \n\t"[(r >> 8) % 3] : (uint8_t)(r >> 16);
        }
        for (int w = 0; w < 2; w++) {
            tile_t t = {buf, buf, 1};
            pretok_split(w ? gpt : fab, s, buf, n, tile_check, &t);
            tiled &= t.ok && t.next == buf + n;
        }
    }
    EXPECT(tiled, "pieces tile random byte strings exactly");
    printf("pretok: fabula and GPT-2 patterns split as documented; 300 random byte strings tiled (JIT %s)\n",
           pretok_jit_enabled(fab) ? "on" : "off");
    pretok_scratch_free(s);
    pretok_free(fab);
    pretok_free(gpt);
}

/* ------------------------------------------------------------ training against a naive trainer */

static int bytes_cmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

/* Recounts every pair from scratch at every step: slow, obviously right. */
static size_t naive_train(const bytemap_t *counts, size_t nmerges, long long minf, int32_t *out)
{
    size_t nw = counts->n;
    int32_t **w = malloc(nw * sizeof *w);
    size_t *wl = malloc(nw * sizeof *wl);
    for (size_t i = 0; i < nw; i++) {
        size_t kn;
        const uint8_t *k = bytemap_key(counts, i, &kn);
        w[i] = malloc((kn + 1) * sizeof **w);
        for (size_t j = 0; j < kn; j++)
            w[i][j] = k[j];
        wl[i] = kn;
    }
    uint8_t **tb = malloc((256 + nmerges) * sizeof *tb);
    size_t *tl = malloc((256 + nmerges) * sizeof *tl);
    for (int b = 0; b < 256; b++) {
        tb[b] = malloc(1);
        tb[b][0] = (uint8_t)b;
        tl[b] = 1;
    }
    bytemap_t pc;
    size_t m = 0;
    for (; m < nmerges; m++) {
        bytemap_init(&pc);
        for (size_t i = 0; i < nw; i++)
            for (size_t j = 0; j + 1 < wl[i]; j++) {
                int32_t key[2] = {w[i][j], w[i][j + 1]};
                *bytemap_insert(&pc, (uint8_t *)key, sizeof key, bytemap_hash((uint8_t *)key, sizeof key), NULL) +=
                    counts->val[i];
            }
        long long best = 0;
        int32_t ba = -1, bb = -1;
        for (size_t e = 0; e < pc.n; e++) {
            size_t kn;
            const int32_t *key = (const int32_t *)bytemap_key(&pc, e, &kn);
            long long c = (long long)pc.val[e];
            int better = c > best;
            if (c == best && ba >= 0) {
                int x = bytes_cmp(tb[key[0]], tl[key[0]], tb[ba], tl[ba]);
                if (!x)
                    x = bytes_cmp(tb[key[1]], tl[key[1]], tb[bb], tl[bb]);
                if (!x)
                    x = key[0] != ba ? (key[0] < ba ? -1 : 1) : (key[1] < bb ? -1 : key[1] > bb);
                better = x < 0;
            }
            if (better) {
                best = c;
                ba = key[0];
                bb = key[1];
            }
        }
        bytemap_free(&pc);
        if (ba < 0 || best < minf)
            break;
        int32_t id = (int32_t)(256 + m);
        out[2 * m] = ba;
        out[2 * m + 1] = bb;
        tb[id] = malloc(tl[ba] + tl[bb]);
        memcpy(tb[id], tb[ba], tl[ba]);
        memcpy(tb[id] + tl[ba], tb[bb], tl[bb]);
        tl[id] = tl[ba] + tl[bb];
        for (size_t i = 0; i < nw; i++) {
            size_t j = 0;
            for (size_t k = 0; k < wl[i];)
                if (k + 1 < wl[i] && w[i][k] == ba && w[i][k + 1] == bb) {
                    w[i][j++] = id;
                    k += 2;
                } else {
                    w[i][j++] = w[i][k++];
                }
            wl[i] = j;
        }
    }
    for (size_t i = 0; i < 256 + m; i++)
        free(tb[i]);
    for (size_t i = 0; i < nw; i++)
        free(w[i]);
    free(tb);
    free(tl);
    free(w);
    free(wl);
    return m;
}

/* Pre-token counts of the sample (or of every other novel, for the split test). */
static void count_sample(const novel_set_t *set, int part, int nparts, bytemap_t *counts)
{
    pretok_t *pt = pretok_new();
    char err[256];
    pretok_add_split(pt, PRETOK_FABULA_PATTERN, 0, PRETOK_ISOLATED, 0, err, sizeof err);
    pretok_scratch_t *s = pretok_scratch_new();
    for (int i = part; i < set->n; i += nparts)
        bpe_count_pretokens(pt, s, set->novels[i].content, set->novels[i].len, counts);
    pretok_scratch_free(s);
    pretok_free(pt);
}

static void test_train(const novel_set_t *set, int32_t **merges_out, size_t *nmerges_out)
{
    bytemap_t all, a, b;
    bytemap_init(&all);
    bytemap_init(&a);
    bytemap_init(&b);
    count_sample(set, 0, 1, &all);
    count_sample(set, 0, 2, &a);
    count_sample(set, 1, 2, &b);
    /* Counts packed on one "rank" and added on another equal the counts of all. */
    size_t n;
    uint8_t *pack = bpe_counts_pack(&b, &n);
    EXPECT(bpe_counts_add_packed(&a, pack, n) == 0, "packed counts read back");
    bytemap_t scratch;
    bytemap_init(&scratch);
    EXPECT(n > 0 && bpe_counts_add_packed(&scratch, pack, n - 1) == -1, "a truncated pack is refused");
    bytemap_free(&scratch);
    free(pack);
    int same = a.n == all.n;
    for (size_t i = 0; same && i < all.n; i++) {
        size_t kn;
        const uint8_t *k = bytemap_key(&all, i, &kn);
        uint64_t *v = bytemap_find(&a, k, kn, bytemap_hash(k, kn));
        same = v && *v == all.val[i];
    }
    EXPECT(same, "merged half counts equal the whole counts (%zu distinct pre-tokens)", all.n);

    const size_t want = 400;
    size_t nf = 0, nn;
    int32_t *fast = bpe_train(&all, want, 2, 0, &nf);
    int32_t *naive = malloc(2 * want * sizeof *naive);
    nn = naive_train(&all, want, 2, naive);
    EXPECT(nf == nn && !memcmp(fast, naive, 2 * nf * sizeof *fast), "trainer equals the naive trainer (%zu vs %zu merges)",
           nf, nn);
    /* The order the counts were collected in does not matter. */
    size_t na;
    int32_t *other = bpe_train(&a, want, 2, 0, &na);
    EXPECT(na == nf && !memcmp(other, fast, 2 * nf * sizeof *fast), "same merges from counts in another order");
    /* A high minimum frequency stops early. */
    size_t nstop;
    int32_t *few = bpe_train(&all, want, 1000000, 0, &nstop);
    EXPECT(nstop == 0, "no pair occurs 10^6 times: %zu merges", nstop);
    printf("bpe_train: %zu merges equal a naive trainer's; counts merge exactly; order-independent\n", nf);
    free(few);
    free(other);
    free(naive);
    bytemap_free(&all);
    bytemap_free(&a);
    bytemap_free(&b);

    /* The tokenizer used by the tests below: more merges, from the same trainer. */
    bytemap_init(&all);
    count_sample(set, 0, 1, &all);
    free(fast);
    *merges_out = bpe_train(&all, 1500, 2, 0, nmerges_out);
    bytemap_free(&all);
}

/* ------------------------------------------------------------ encode against a naive encoder */

typedef struct naive_ctx {
    const tokenizer_t *t;
    const int32_t *merges;
    size_t nm;
    token_vec_t *out;
} naive_ctx_t;

/* GPT-2's rule, literally: find the adjacent pair with the lowest merge
 * rank by scanning the merge list, merge its leftmost occurrence, repeat. */
static void naive_piece(void *p, const uint8_t *s, size_t n)
{
    naive_ctx_t *c = p;
    int32_t *sym = malloc(n * sizeof *sym);
    size_t k = n;
    for (size_t i = 0; i < n; i++)
        sym[i] = s[i];
    for (;;) {
        size_t best = c->nm, at = 0;
        for (size_t i = 0; i + 1 < k; i++)
            for (size_t r = 0; r < best; r++)
                if (c->merges[2 * r] == sym[i] && c->merges[2 * r + 1] == sym[i + 1]) {
                    best = r;
                    at = i;
                    break;
                }
        if (best == c->nm)
            break;
        sym[at] = (int32_t)(256 + best);
        memmove(sym + at + 1, sym + at + 2, (k - at - 2) * sizeof *sym);
        k--;
    }
    for (size_t i = 0; i < k; i++)
        token_vec_push(c->out, sym[i]);
    free(sym);
}

static void test_encode_naive(const tokenizer_t *t, const int32_t *merges, size_t nm, const novel_set_t *set)
{
    size_t compared = 0;
    int same = 1;
    for (int i = 0; i < set->n; i++) {
        size_t n = set->novels[i].len < 6000 ? set->novels[i].len : 6000;
        token_vec_t fast = {0}, slow = {0};
        tokenizer_encode(t, set->novels[i].content, n, &fast);
        naive_ctx_t c = {t, merges, nm, &slow};
        pretok_scratch_t *s = pretok_scratch_new();
        pretok_split(t->pretok, s, set->novels[i].content, n, naive_piece, &c);
        pretok_scratch_free(s);
        same &= fast.n == slow.n && !memcmp(fast.ids, slow.ids, fast.n * sizeof *fast.ids);
        compared += fast.n;
        token_vec_free(&fast);
        token_vec_free(&slow);
    }
    EXPECT(same, "fabula-bpe encode equals the naive encoder");

    /* The priority-queue path equals the linear one on random words. */
    bpe_work_t *lin = bpe_work_new(), *heap = bpe_work_new();
    bpe_work_set_heap_threshold(lin, SIZE_MAX);
    bpe_work_set_heap_threshold(heap, 0);
    int agree = 1;
    for (int trial = 0; trial < 400; trial++) {
        const novel_t *nv = &set->novels[rnd() % (uint64_t)set->n];
        size_t len = 1 + rnd() % 400, off = rnd() % (nv->len - len);
        token_vec_t a = {0}, b = {0};
        bpe_encode_word(t->bpe, lin, nv->content + off, len, &a);
        bpe_encode_word(t->bpe, heap, nv->content + off, len, &b);
        agree &= a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof *a.ids);
        token_vec_free(&a);
        token_vec_free(&b);
    }
    EXPECT(agree, "linear and priority-queue BPE agree on 400 random words");
    bpe_work_free(lin);
    bpe_work_free(heap);
    printf("encode: %zu tokens equal a naive GPT-2-rule encoder; linear == heap on 400 words\n", compared);
}

/* ------------------------------------------------------------ round trips, specials, digests */

static int round_trip(const tokenizer_t *t, const uint8_t *x, size_t n)
{
    token_vec_t ids = {0};
    tokenizer_encode(t, x, n, &ids);
    int ok = 1;
    for (size_t i = 0; i < ids.n; i++)
        ok &= ids.ids[i] >= 0 && ids.ids[i] < tokenizer_vocab_size(t);
    size_t len;
    uint8_t *back = tokenizer_decode(t, ids.ids, ids.n, &len);
    ok &= len == n && !memcmp(back, x, n);
    free(back);
    token_vec_free(&ids);
    return ok;
}

static void test_round_trips(const tokenizer_t *t, const novel_set_t *set)
{
    int ok = 1;
    for (int trial = 0; trial < 500; trial++) {
        uint8_t buf[700];
        size_t n = rnd() % sizeof buf;
        int mode = trial % 3;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd();
            /* 0: any bytes; 1: mostly ASCII words and spaces; 2: UTF-8 of CJK with junk spliced in. */
            if (mode == 0)
                buf[i] = (uint8_t)r;
            else if (mode == 1)
                buf[i] = (r & 7) == 0 ? ' ' : (r & 7) == 1 ? (uint8_t)(r >> 8) : (uint8_t)('a' + (r >> 8) % 26);
            else if (i + 3 <= n && (r & 3)) {
                uint32_t cp = 0x4E00 + (uint32_t)(r >> 8) % 0x5000;
                buf[i++] = (uint8_t)(0xE0 | cp >> 12);
                buf[i++] = (uint8_t)(0x80 | ((cp >> 6) & 63));
                buf[i] = (uint8_t)(0x80 | (cp & 63));
            } else
                buf[i] = (uint8_t)(r >> 24);
        }
        ok &= round_trip(t, buf, n);
    }
    int novels_ok = 1;
    for (int i = 0; i < set->n; i++)
        novels_ok &= round_trip(t, set->novels[i].content, set->novels[i].len);
    EXPECT(ok, "%s: decode(encode(x)) == x on 500 random byte strings", tokenizer_source(t));
    EXPECT(novels_ok, "%s: decode(encode(x)) == x on the %d sample novels", tokenizer_source(t), set->n);

    /* Threads share the tokenizer: results equal the serial ones. */
    token_vec_t serial[16] = {{0}}, par[16] = {{0}};
    int nn = set->n < 16 ? set->n : 16;
    for (int i = 0; i < nn; i++)
        tokenizer_encode(t, set->novels[i].content, set->novels[i].len, &serial[i]);
#pragma omp parallel for num_threads(4) schedule(dynamic, 1)
    for (int k = 0; k < 4 * nn; k++)
        if (k % 4 == 0)
            tokenizer_encode(t, set->novels[k / 4].content, set->novels[k / 4].len, &par[k / 4]);
        else {
            token_vec_t tmp = {0};
            tokenizer_encode(t, set->novels[k / 4].content, set->novels[k / 4].len / 2, &tmp);
            token_vec_free(&tmp);
        }
    int same = 1;
    for (int i = 0; i < nn; i++) {
        same &= serial[i].n == par[i].n && !memcmp(serial[i].ids, par[i].ids, serial[i].n * sizeof(int32_t));
        token_vec_free(&serial[i]);
        token_vec_free(&par[i]);
    }
    EXPECT(same, "%s: encoding from 4 threads equals serial encoding", tokenizer_source(t));
    printf("round trip: %s (%s, vocab %d): 500 random strings, %d novels, 4 threads\n", tokenizer_source(t),
           tokenizer_kind(t), tokenizer_vocab_size(t), set->n);
}

static void expect_specials(const tokenizer_t *t, int32_t first)
{
    int ok = 1;
    for (int k = 0; k < BYTETOK_VOCAB - 256; k++) {
        const char *name = bytetok_token_name(256 + k);
        int32_t id = tokenizer_special(t, name);
        ok &= id == first + k;
        size_t len;
        uint8_t *text = tokenizer_decode(t, &id, 1, &len);
        ok &= len == strlen(name) && !memcmp(text, name, len);
        free(text);
    }
    EXPECT(ok, "%s: the 13 specials are ids %d.. in docs/data.md order and decode to their names",
           tokenizer_source(t), (int)first);
    EXPECT(tokenizer_special(t, "<|no_such|>") == -1, "unknown special -> -1");
}

static void test_digest(const tokenizer_t *t)
{
    size_t n;
    char *canon = tokenizer_canonical(t, &n);
    write_file("tok_canon.txt", canon, n);
    char ref[65];
    sha256sum_of("tok_canon.txt", ref);
    EXPECT(!ref[0] || !strcmp(ref, tokenizer_digest(t)), "%s: digest is sha256sum of the canonical text",
           tokenizer_source(t));
    free(canon);
    unlink("tok_canon.txt");
}

/* For testlib_child_exit, which runs it with stderr silenced. */
static void load_and_free(const void *path) { tokenizer_free(tokenizer_load(path)); }

/* The file text of `json` with the first occurrence of `from` replaced by `to`. */
static void write_edited(const char *path, const char *json, const char *from, const char *to)
{
    const char *at = strstr(json, from);
    if (!at) {
        fprintf(stderr, "test bug: '%s' not in the file\n", from);
        exit(1);
    }
    FILE *f = fopen(path, "wb");
    fwrite(json, 1, (size_t)(at - json), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
}

static void test_fabula_file(const tokenizer_t *t, const int32_t *merges, size_t nm)
{
    size_t len;
    char *json = tokenizer_fabula_to_json(t, NULL, &len);
    write_file("tok_ok.json", json, len);
    tokenizer_t *u = tokenizer_load("tok_ok.json");
    EXPECT(!strcmp(tokenizer_digest(u), tokenizer_digest(t)), "digest survives the file");
    EXPECT(!strcmp(tokenizer_kind(u), "fabula-bpe") && tokenizer_vocab_size(u) == (int)(256 + nm + 13),
           "kind and vocab size from the file");
    tokenizer_t *again = tokenizer_fabula_build("again", PRETOK_FABULA_PATTERN, merges, nm);
    EXPECT(!strcmp(tokenizer_digest(again), tokenizer_digest(t)), "same content, same digest");
    tokenizer_free(again);
    int32_t *fewer = malloc(2 * nm * sizeof *fewer);
    memcpy(fewer, merges, 2 * nm * sizeof *fewer);
    tokenizer_t *other = tokenizer_fabula_build("other", PRETOK_FABULA_PATTERN, fewer, nm - 1);
    EXPECT(strcmp(tokenizer_digest(other), tokenizer_digest(t)) != 0, "one merge fewer, another digest");
    tokenizer_free(other);
    free(fewer);
    tokenizer_free(u);

    EXPECT(testlib_child_exit(load_and_free, "tok_ok.json", "/dev/null") == 0, "a good file loads in a child");
    char dg[80];
    snprintf(dg, sizeof dg, "\"digest\": \"%s\"", tokenizer_digest(t));
    char bad[80];
    snprintf(bad, sizeof bad, "\"digest\": \"%c%s\"", tokenizer_digest(t)[0] == '0' ? '1' : '0', tokenizer_digest(t) + 1);
    write_edited("tok_bad.json", json, dg, bad);
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "a wrong digest exits 3");
    char m0[64], m0s[64];
    snprintf(m0, sizeof m0, "[%d, %d]", (int)merges[0], (int)merges[1]);
    snprintf(m0s, sizeof m0s, "[%d, %d]", (int)merges[1], (int)merges[0]);
    write_edited("tok_bad.json", json, m0, m0s);
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "an edited merge (digest mismatch) exits 3");
    write_edited("tok_bad.json", json, m0, "[0, 9999999]");
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "a merge of undefined ids exits 3");
    write_edited("tok_bad.json", json, "\"version\": 1", "\"version\": 2");
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "version 2 exits 3");
    write_edited("tok_bad.json", json, "{", "[");
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "not JSON exits 3");
    write_file("tok_bad.json", "{\"hello\": 1}", 12);
    EXPECT(testlib_child_exit(load_and_free, "tok_bad.json", "/dev/null") == FB_EXIT_DATA, "JSON of another kind exits 3");
    EXPECT(testlib_child_exit(load_and_free, "tok_no_such_file.json", "/dev/null") == FB_EXIT_IO, "a missing file exits 4");
    free(json);
    unlink("tok_ok.json");
    unlink("tok_bad.json");
    printf("fabula file: written, read back, digest verified; 6 damaged files refused with exit 3, missing 4\n");
}

/* A minimal byte-level tokenizer.json (256 bytes + one merge) with one field changed. */
static void write_small_hf(const char *path, const char *pretok, const char *model_extra, int drop_byte)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char ch[3] = {0};
        bytelevel_char_utf8((uint8_t)b, ch);
        if (b != drop_byte)
            json_object_set_new(vocab, ch, json_integer(b));
    }
    /* ids number the entries (a hole is refused): without a byte, "ab"
     * takes that byte's id */
    json_object_set_new(vocab, "ab", json_integer(drop_byte < 0 ? 256 : drop_byte));
    char text[8192];
    char *v = json_dumps(vocab, JSON_COMPACT);
    snprintf(text, sizeof text,
             "{\"added_tokens\": [{\"id\": %d, \"content\": \"<|pad|>\", \"special\": true}],"
             " \"normalizer\": null, \"pre_tokenizer\": %s,"
             " \"model\": {%s \"vocab\": %s, \"merges\": [\"a b\"]}}",
             drop_byte < 0 ? 257 : 256, pretok, model_extra, v);
    free(v);
    json_decref(vocab);
    write_file(path, text, strlen(text));
}

static void test_hf_small(void)
{
    const char *bl = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}";
    write_small_hf("tok_hf.json", bl, "", -1);
    tokenizer_t *t = tokenizer_load("tok_hf.json");
    EXPECT(tokenizer_special(t, "<|pad|>") == 257, "an added token keeps its id (257)");
    EXPECT(tokenizer_special(t, "<|bos|>") == 258 && tokenizer_special(t, "<|genre_unknown|>") == 269 &&
               tokenizer_vocab_size(t) == 270,
           "the 12 missing specials follow the largest id, in order");
    token_vec_t ids = {0};
    tokenizer_encode(t, (const uint8_t *)"xab", 3, &ids);
    EXPECT(ids.n == 2 && ids.ids[0] == 'x' && ids.ids[1] == 256, "\"xab\" -> x, ab");
    token_vec_free(&ids);
    int32_t odd[2] = {99999, -5};
    size_t len;
    uint8_t *s = tokenizer_decode(t, odd, 2, &len);
    EXPECT(len == strlen("<|id_99999|><|id_-5|>") && !memcmp(s, "<|id_99999|><|id_-5|>", len),
           "ids outside the vocabulary decode as <|id_N|>");
    free(s);
    tokenizer_free(t);

    struct {
        const char *pretok, *model;
        int drop;
        const char *what;
    } bad[] = {
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "", -1, "add_prefix_space true"},
        {"null", "", -1, "no pre_tokenizer"},
        {"{\"type\": \"Whitespace\"}", "", -1, "a Whitespace pre_tokenizer"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, "
         "\"behavior\": \"Removed\"}, " "{\"type\": \"ByteLevel\"}]}", "", -1, "Split Removed"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
         "\"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\"}]}", "", -1, "a regex that does not compile"},
        {bl, "\"type\": \"WordPiece\",", -1, "model WordPiece"},
        {bl, "\"dropout\": 0.1,", -1, "BPE dropout"},
        {bl, "\"continuing_subword_prefix\": \"##\",", -1, "a subword prefix"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_small_hf("tok_hf.json", bad[i].pretok, bad[i].model, bad[i].drop);
        EXPECT(testlib_child_exit(load_and_free, "tok_hf.json", "/dev/null") == FB_EXIT_DATA, "%s: exit 3", bad[i].what);
    }
    /* A byte without a token is dropped before merging, so its neighbours
     * merge: tokenizers 0.22.2 gives [120, 113] for "xaqb" on this file
     * ("ab" has q's id, 113). */
    write_small_hf("tok_hf.json", bl, "", 'q');
    t = tokenizer_load("tok_hf.json");
    tokenizer_encode(t, (const uint8_t *)"xaqb", 4, &ids);
    EXPECT(ids.n == 2 && ids.ids[0] == 'x' && ids.ids[1] == 'q', "a vocab without 'q': \"xaqb\" -> x, ab");
    EXPECT(tokenizer_is_lossy(t), "a vocab without 'q' is lossy");
    size_t elen;
    uint8_t *e = tokenizer_expected_text(t, (const uint8_t *)"xaqb", 4, &elen);
    s = tokenizer_decode(t, ids.ids, ids.n, &len);
    EXPECT(elen == 3 && len == 3 && !memcmp(e, "xab", 3) && !memcmp(s, "xab", 3),
           "decode and the expected text drop the q");
    free(e);
    free(s);
    token_vec_free(&ids);
    tokenizer_free(t);
    unlink("tok_hf.json");
    printf("hf: added-token ids kept, specials appended; %zu unsupported files refused with exit 3\n",
           sizeof bad / sizeof *bad);
}

int main(void)
{
    const char *src = getenv("FB_SRCDIR");
    snprintf(sample_path, sizeof sample_path, "%s/inputs/sample.jsonl", src ? src : ".");
    test_sha256();
    test_bytelevel();
    test_pretok();

    novel_set_t set;
    novels_load(&set, sample_path);
    int32_t *merges;
    size_t nm;
    test_train(&set, &merges, &nm);
    tokenizer_t *fab = tokenizer_fabula_build("trained-in-test", PRETOK_FABULA_PATTERN, merges, nm);
    test_encode_naive(fab, merges, nm, &set);

    tokenizer_t *bytes = tokenizer_load("bytes");
    char gpt2[4200], minimind[4200];
    snprintf(gpt2, sizeof gpt2, "%s/tests/data/tokenizers/gpt2/tokenizer.json", src ? src : ".");
    snprintf(minimind, sizeof minimind, "%s/tests/data/tokenizers/minimind/tokenizer.json", src ? src : ".");
    tokenizer_t *hf1 = tokenizer_load(gpt2), *hf2 = tokenizer_load(minimind);
    tokenizer_t *all[] = {bytes, fab, hf1, hf2};
    for (int i = 0; i < 4; i++) {
        test_round_trips(all[i], &set);
        test_digest(all[i]);
    }
    expect_specials(bytes, 256);
    expect_specials(fab, (int32_t)(256 + nm));
    expect_specials(hf1, 50257);
    expect_specials(hf2, 6400);
    EXPECT(tokenizer_special(hf1, "<|endoftext|>") == 50256, "GPT-2's <|endoftext|> keeps id 50256");
    tokenizer_t *hf1b = tokenizer_load(gpt2);
    EXPECT(!strcmp(tokenizer_digest(hf1), tokenizer_digest(hf1b)), "loading twice gives the same digest");
    tokenizer_free(hf1b);
    tokenizer_t *bytes2 = tokenizer_load("bytes");
    EXPECT(!strcmp(tokenizer_digest(bytes), tokenizer_digest(bytes2)), "the bytes digest is fixed");
    EXPECT(strcmp(tokenizer_digest(bytes), tokenizer_digest(fab)) && strcmp(tokenizer_digest(hf1), tokenizer_digest(hf2)),
           "different tokenizers, different digests");
    tokenizer_free(bytes2);

    test_fabula_file(fab, merges, nm);
    test_hf_small();

    for (int i = 0; i < 4; i++)
        tokenizer_free(all[i]);
    free(merges);
    novels_free(&set);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
