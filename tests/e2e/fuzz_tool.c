/* Seeded mutations of input files for the fuzz tests (never installed):
 *
 *   fuzz_tool json SEED IN OUT [HOT]         1-3 mutations of JSON text: a
 *       number, string or literal replaced by an extreme one, a byte
 *       deleted, a bracket swapped, a span duplicated, or the text cut
 *       short; with HOT, most of them fall in its first HOT bytes
 *   fuzz_tool safetensors SEED IN OUT        the header of a safetensors
 *       file mutated as JSON, its length rewritten (or, one time in ten,
 *       replaced by an extreme one); the data bytes kept
 *   fuzz_tool bytes SEED IN OUT OFF LEN      one byte in [OFF, OFF + LEN)
 *       xor-ed with a non-zero mask
 *
 * The same SEED gives the same file, so a failing case can be made again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint32_t rnd(uint32_t n)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return n ? (uint32_t)((state >> 33) % n) : 0;
}

typedef struct buf {
    char *p;
    size_t n;
} buf_t;

static buf_t slurp(const char *path)
{
    buf_t b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 16;
    b.p = malloc(cap);
    size_t got;
    while (b.p && (got = fread(b.p + b.n, 1, cap - b.n, f)) > 0)
        if ((b.n += got) == cap)
            b.p = realloc(b.p, cap *= 2);
    if (!b.p || ferror(f)) {
        perror(path);
        exit(2);
    }
    fclose(f);
    return b;
}

static void spit(const char *path, const void *p, size_t n, const void *tail, size_t ntail)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || (ntail && fwrite(tail, 1, ntail, f) != ntail) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

/* b[at, at + len) replaced by rep[0, nrep) */
static void splice(buf_t *b, size_t at, size_t len, const char *rep, size_t nrep)
{
    char *q = malloc(b->n - len + nrep + 1);
    if (!q)
        exit(2);
    memcpy(q, b->p, at);
    memcpy(q + at, rep, nrep);
    memcpy(q + at + nrep, b->p + at + len, b->n - at - len);
    free(b->p);
    b->p = q;
    b->n = b->n - len + nrep;
}

/* The token of JSON text starting at or after `at`: its kind ('"' string,
 * '0' number, 'a' literal, '{' punctuation) and extent; 0 at the end. */
static int token_at(const buf_t *b, size_t at, size_t *s, size_t *e)
{
    size_t i = at;
    while (i < b->n && strchr(" \t\r\n", b->p[i]))
        i++;
    if (i >= b->n)
        return 0;
    *s = i;
    char c = b->p[i];
    if (c == '"') {
        for (i++; i < b->n && b->p[i] != '"'; i++)
            if (b->p[i] == '\\')
                i++;
        *e = i < b->n ? i + 1 : b->n;
        return '"';
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        while (i < b->n && strchr("+-.eE0123456789", b->p[i]))
            i++;
        *e = i;
        return '0';
    }
    if (c >= 'a' && c <= 'z') {
        while (i < b->n && b->p[i] >= 'a' && b->p[i] <= 'z')
            i++;
        *e = i;
        return 'a';
    }
    *e = i + 1;
    return '{';
}

static const char *const numbers[] = {
    "0", "-1", "1", "255", "256", "65535", "2147483647", "2147483648", "4294967296", "1000000000",
    "9223372036854775807", "-9223372036854775808", "99999999999999999999999", "1e308", "1e999", "0.5", "-0.0",
    "1e-308", "100000000",
};
static const char *const strings[] = {"\"\"", "\"x\"", "\"\\u0000\"", "\"(\"", "\"\\\\\"", "\"[a-\"", "\"(?=a)\"",
                                      "\"Removed\"", "\"F64\"", "\"BF16\"", "\"model.safetensors\"",
                                      "\"../x\"", "\"llama\""};
static const char *const literals[] = {"true", "false", "null", "{}", "[]", "[[]]", "{\"a\": 1}"};

/* A token of the text, aligned: mutations replace whole tokens. */
typedef struct tok {
    size_t s, e;
    int kind;
} tok_t;

static size_t tokens_of(const buf_t *b, tok_t **out)
{
    size_t n = 0, cap = 1024, at = 0, s, e;
    tok_t *t = malloc(cap * sizeof *t);
    int kind;
    while (t && (kind = token_at(b, at, &s, &e)) != 0) {
        if (n == cap)
            t = realloc(t, (cap *= 2) * sizeof *t);
        if (!t)
            break;
        t[n++] = (tok_t){s, e, kind};
        at = e;
    }
    if (!t)
        exit(2);
    *out = t;
    return n;
}

static void mutate_json(buf_t *b, size_t hot)
{
    int k = 1 + (int)rnd(3);
    for (int m = 0; m < k && b->n > 0; m++) {
        tok_t *t;
        size_t nt = tokens_of(b, &t), nhot = 0;
        while (nhot < nt && t[nhot].s < hot)
            nhot++;
        if (nt == 0) {
            free(t);
            break;
        }
        size_t pick = nhot && rnd(4) ? rnd((uint32_t)nhot) : rnd((uint32_t)nt);
        size_t s = t[pick].s, e = t[pick].e;
        int kind = t[pick].kind;
        free(t);
        int op = (int)rnd(100);
        if (op < 70 && kind == '0') {
            const char *r = numbers[rnd(sizeof numbers / sizeof *numbers)];
            splice(b, s, e - s, r, strlen(r));
        } else if (op < 70 && kind == '"') {
            if (rnd(8) == 0) { /* a long string */
                size_t n = 1 + rnd(1 << 16);
                char *r = malloc(n + 2);
                if (!r)
                    exit(2);
                memset(r, 'a', n + 2);
                r[0] = r[n + 1] = '"';
                splice(b, s, e - s, r, n + 2);
                free(r);
            } else {
                const char *r = strings[rnd(sizeof strings / sizeof *strings)];
                splice(b, s, e - s, r, strlen(r));
            }
        } else if (op < 70 && kind == 'a') {
            const char *r = literals[rnd(sizeof literals / sizeof *literals)];
            splice(b, s, e - s, r, strlen(r));
        } else if (op < 80) {
            splice(b, s, e - s, "", 0); /* a token removed */
        } else if (op < 88 && kind == '{') {
            static const char punct[] = "{}[],:";
            char c = punct[rnd(6)];
            splice(b, s, 1, &c, 1);
        } else if (op < 95) {
            size_t len = 1 + rnd(64);
            if (s + len > b->n)
                len = b->n - s;
            char *copy = malloc(len + 1);
            if (!copy)
                exit(2);
            memcpy(copy, b->p + s, len);
            splice(b, s, 0, copy, len);
            free(copy);
        } else {
            b->n = s; /* cut short */
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: fuzz_tool json|safetensors|bytes SEED IN OUT [...]\n");
        return 2;
    }
    state = strtoull(argv[2], NULL, 10) * 2654435761ULL + 1;
    rnd(1);
    buf_t b = slurp(argv[3]);
    if (!strcmp(argv[1], "json")) {
        mutate_json(&b, argc > 5 ? strtoull(argv[5], NULL, 10) : 0);
        spit(argv[4], b.p, b.n, NULL, 0);
    } else if (!strcmp(argv[1], "safetensors")) {
        uint64_t h = 0;
        for (int i = 7; i >= 0 && b.n >= 8; i--)
            h = h << 8 | (uint8_t)b.p[i];
        if (b.n < 8 || h > b.n - 8)
            return 2;
        buf_t hdr = {malloc(h + 1), h};
        memcpy(hdr.p, b.p + 8, h);
        mutate_json(&hdr, 0);
        uint64_t len = hdr.n;
        if (rnd(10) == 0) {
            static const uint64_t odd[] = {0, 1, 7, UINT64_MAX, (uint64_t)1 << 40, (uint64_t)100 << 20};
            len = rnd(2) ? odd[rnd(6)] : hdr.n + 1 + rnd(16);
        }
        uint8_t l8[8];
        for (int i = 0; i < 8; i++)
            l8[i] = (uint8_t)(len >> (8 * i));
        buf_t out = {malloc(8 + hdr.n), 8 + hdr.n};
        memcpy(out.p, l8, 8);
        memcpy(out.p + 8, hdr.p, hdr.n);
        spit(argv[4], out.p, out.n, b.p + 8 + h, b.n - 8 - h);
    } else if (!strcmp(argv[1], "bytes") && argc == 7) {
        size_t off = strtoull(argv[5], NULL, 10), len = strtoull(argv[6], NULL, 10);
        if (off < b.n) {
            size_t at = off + rnd((uint32_t)(len && off + len <= b.n ? len : b.n - off));
            b.p[at] ^= (char)(1 + rnd(255));
        }
        spit(argv[4], b.p, b.n, NULL, 0);
    } else {
        fprintf(stderr, "fuzz_tool: bad command line\n");
        return 2;
    }
    return 0;
}
