#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/normalizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/error.h"

typedef enum step_kind {
    ST_FORM,
    ST_LOWER,
    ST_STRIP,
    ST_DROP_MN,       /* remove non-spacing marks */
    ST_PREPEND,
    ST_REPLACE,
    ST_BERT_CLEAN,    /* BertNormalizer's clean_text */
    ST_BERT_CHINESE,  /* BertNormalizer's handle_chinese_chars */
} step_kind_t;

typedef struct nstep {
    step_kind_t kind;
    int a, b;         /* form; strip left/right; replace: literal */
    char *s, *t;      /* prepend text; replace pattern and content */
    pcre2_code *code; /* replace */
} nstep_t;

struct normalizer {
    nstep_t *steps;
    int n;
};

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void buf_add(buf_t *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = fb_realloc(b->p, cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void buf_cp(buf_t *b, utf8proc_int32_t cp)
{
    utf8proc_uint8_t u[4];
    buf_add(b, u, (size_t)utf8proc_encode_char(cp, u));
}

normalizer_t *normalizer_new(void) { return fb_calloc(1, sizeof(normalizer_t)); }

void normalizer_free(normalizer_t *nz)
{
    if (!nz)
        return;
    for (int i = 0; i < nz->n; i++) {
        free(nz->steps[i].s);
        free(nz->steps[i].t);
        pcre2_code_free(nz->steps[i].code);
    }
    free(nz->steps);
    free(nz);
}

int normalizer_nsteps(const normalizer_t *nz) { return nz->n; }

static nstep_t *push(normalizer_t *nz, step_kind_t kind)
{
    nz->steps = fb_realloc(nz->steps, (size_t)(nz->n + 1) * sizeof *nz->steps);
    nstep_t *s = &nz->steps[nz->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    return s;
}

void normalizer_add_form(normalizer_t *nz, norm_form_t form) { push(nz, ST_FORM)->a = (int)form; }
void normalizer_add_lowercase(normalizer_t *nz) { push(nz, ST_LOWER); }
void normalizer_add_strip_accents(normalizer_t *nz) { push(nz, ST_DROP_MN); }
void normalizer_add_prepend(normalizer_t *nz, const char *prefix) { push(nz, ST_PREPEND)->s = fb_strdup(prefix); }

void normalizer_add_strip(normalizer_t *nz, int left, int right)
{
    nstep_t *s = push(nz, ST_STRIP);
    s->a = left;
    s->b = right;
}

int normalizer_add_replace(normalizer_t *nz, const char *pattern, int literal, const char *content, char *err,
                           size_t errlen)
{
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &errcode, &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        snprintf(err, errlen, "Replace regex /%s/ at offset %zu: %s", pattern, (size_t)erroff, (const char *)msg);
        return -1;
    }
    nstep_t *s = push(nz, ST_REPLACE);
    s->a = literal;
    s->s = fb_strdup(pattern);
    s->t = fb_strdup(content);
    s->code = code;
    return 0;
}

void normalizer_add_bert(normalizer_t *nz, int clean_text, int chinese_chars, int strip_accents, int lowercase)
{
    /* The order of tokenizers' BertNormalizer::normalize. */
    if (clean_text)
        push(nz, ST_BERT_CLEAN);
    if (chinese_chars)
        push(nz, ST_BERT_CHINESE);
    if (strip_accents) {
        normalizer_add_form(nz, NORM_NFD);
        push(nz, ST_DROP_MN);
    }
    if (lowercase)
        push(nz, ST_LOWER);
}

/* Rust's char::is_whitespace: the Unicode White_Space property. */
static int is_white_space(utf8proc_int32_t c)
{
    if ((c >= 0x09 && c <= 0x0D) || c == 0x85)
        return 1;
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

/* The CJK blocks of tokenizers' BertNormalizer (Google BERT's list). */
static int is_chinese_char(utf8proc_int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* One character of a per-character step. */
static void map_char(const nstep_t *st, utf8proc_int32_t c, buf_t *out)
{
    switch (st->kind) {
    case ST_LOWER:
        /* Rust's char::to_lowercase is the full mapping; U+0130 is the one
         * character whose lowercase is two (SpecialCasing, unconditional). */
        if (c == 0x130) {
            buf_cp(out, 'i');
            buf_cp(out, 0x307);
        } else {
            buf_cp(out, utf8proc_tolower(c));
        }
        return;
    case ST_DROP_MN:
        if (utf8proc_category(c) != UTF8PROC_CATEGORY_MN)
            buf_cp(out, c);
        return;
    case ST_BERT_CLEAN: {
        utf8proc_category_t k = utf8proc_category(c);
        /* tokenizers' is_other: Cc, Cf, Co, Cs; unassigned code points
         * (Cn) are kept (checked with the package on U+FAFF). */
        int other = k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
                    k == UTF8PROC_CATEGORY_CS;
        int control = c != '\t' && c != '\n' && c != '\r' && other;
        if (c == 0 || c == 0xFFFD || control)
            return;
        buf_cp(out, is_white_space(c) ? ' ' : c);
        return;
    }
    case ST_BERT_CHINESE:
        if (is_chinese_char(c)) {
            buf_cp(out, ' ');
            buf_cp(out, c);
            buf_cp(out, ' ');
        } else {
            buf_cp(out, c);
        }
        return;
    default:
        FB_ASSERT(0);
    }
}

/* Length of the valid UTF-8 run at s[0..n). */
static size_t valid_run(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0)
            break;
        i += (size_t)k;
    }
    return i;
}

static void apply_form(int form, const uint8_t *s, size_t n, buf_t *out)
{
    static const int opts[] = {
        UTF8PROC_STABLE | UTF8PROC_COMPOSE,
        UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
        UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
        UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
    };
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t k = utf8proc_map(s, (utf8proc_ssize_t)n, &dst, (utf8proc_option_t)opts[form]);
    if (k < 0)
        fb_fatal(FB_EXIT_INTERNAL, "utf8proc_map failed on valid UTF-8: %s", utf8proc_errmsg(k));
    buf_add(out, dst, (size_t)k);
    free(dst);
}

static void apply_replace(const nstep_t *st, const uint8_t *s, size_t n, buf_t *out)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory creating PCRE2 match data");
    size_t pos = 0, start = 0;
    while (start < n) {
        int rc = pcre2_match(st->code, s, n, start, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            /* the pattern is the file's: a match limit it hits is its problem */
            fb_fatal(FB_EXIT_DATA, "normalizer Replace /%s/ failed: %s", st->s, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {
            /* An empty match replaces nothing: search on from the next character. */
            start = ov[0] + 1;
            while (start < n && (s[start] & 0xC0) == 0x80)
                start++;
            continue;
        }
        buf_add(out, s + pos, ov[0] - pos);
        buf_add(out, st->t, strlen(st->t));
        pos = start = ov[1];
    }
    buf_add(out, s + pos, n - pos);
    pcre2_match_data_free(md);
}

static void apply_step(const nstep_t *st, const uint8_t *s, size_t n, buf_t *out)
{
    switch (st->kind) {
    case ST_PREPEND:
        if (n)
            buf_add(out, st->s, strlen(st->s));
        buf_add(out, s, n);
        return;
    case ST_REPLACE:
        apply_replace(st, s, n, out);
        return;
    case ST_STRIP: {
        size_t b = 0, e = n;
        utf8proc_int32_t c;
        utf8proc_ssize_t k;
        while (st->a && b < e && (k = utf8proc_iterate(s + b, (utf8proc_ssize_t)(e - b), &c)) > 0 &&
               is_white_space(c))
            b += (size_t)k;
        while (st->b && e > b) {
            size_t q = e - 1;
            while (q > b && (s[q] & 0xC0) == 0x80 && e - q < 4)
                q--;
            if ((k = utf8proc_iterate(s + q, (utf8proc_ssize_t)(e - q), &c)) != (utf8proc_ssize_t)(e - q) ||
                !is_white_space(c))
                break;
            e = q;
        }
        buf_add(out, s + b, e - b);
        return;
    }
    default:
        break;
    }
    /* Character steps: valid runs are changed, other bytes kept. */
    size_t i = 0;
    while (i < n) {
        size_t r = valid_run(s + i, n - i);
        if (r == 0) {
            buf_add(out, s + i, 1);
            i++;
            continue;
        }
        if (st->kind == ST_FORM) {
            apply_form(st->a, s + i, r, out);
        } else {
            for (size_t j = i; j < i + r;) {
                utf8proc_int32_t c;
                j += (size_t)utf8proc_iterate(s + j, (utf8proc_ssize_t)(i + r - j), &c);
                map_char(st, c, out);
            }
        }
        i += r;
    }
}

uint8_t *normalizer_apply(const normalizer_t *nz, const uint8_t *text, size_t n, size_t *len)
{
    buf_t a = {0}, b = {0};
    buf_add(&a, text, n);
    for (int i = 0; i < nz->n; i++) {
        b.n = 0;
        apply_step(&nz->steps[i], a.p, a.n, &b);
        buf_t t = a;
        a = b;
        b = t;
    }
    free(b.p);
    buf_add(&a, "", 1); /* a NUL after the text, never counted */
    *len = a.n - 1;
    return a.p;
}

char *normalizer_describe(const normalizer_t *nz)
{
    static const char *forms[] = {"nfc", "nfd", "nfkc", "nfkd"};
    buf_t b = {0};
    char tmp[64];
    for (int i = 0; i < nz->n; i++) {
        const nstep_t *st = &nz->steps[i];
        switch (st->kind) {
        case ST_FORM:
            snprintf(tmp, sizeof tmp, "%s", forms[st->a]);
            break;
        case ST_LOWER:
            snprintf(tmp, sizeof tmp, "lowercase");
            break;
        case ST_STRIP:
            snprintf(tmp, sizeof tmp, "strip left=%d right=%d", st->a, st->b);
            break;
        case ST_DROP_MN:
            snprintf(tmp, sizeof tmp, "strip_accents");
            break;
        case ST_BERT_CLEAN:
            snprintf(tmp, sizeof tmp, "bert_clean_text");
            break;
        case ST_BERT_CHINESE:
            snprintf(tmp, sizeof tmp, "bert_chinese_chars");
            break;
        case ST_PREPEND:
            snprintf(tmp, sizeof tmp, "prepend %zu:", strlen(st->s));
            break;
        case ST_REPLACE:
            snprintf(tmp, sizeof tmp, "replace literal=%d %zu:", st->a, strlen(st->s));
            break;
        }
        buf_add(&b, tmp, strlen(tmp));
        if (st->kind == ST_PREPEND)
            buf_add(&b, st->s, strlen(st->s));
        if (st->kind == ST_REPLACE) {
            buf_add(&b, st->s, strlen(st->s));
            snprintf(tmp, sizeof tmp, " %zu:", strlen(st->t));
            buf_add(&b, tmp, strlen(tmp));
            buf_add(&b, st->t, strlen(st->t));
        }
        buf_add(&b, "\n", 1);
    }
    buf_add(&b, "", 1);
    return (char *)b.p;
}
