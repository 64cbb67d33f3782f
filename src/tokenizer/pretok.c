#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretok.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/bytelevel.h"
#include "util/error.h"

typedef struct pretok_step {
    char *pattern;
    int literal, invert, jit, bytelevel;
    pretok_behavior_t behavior;
    pcre2_code *code;
} pretok_step_t;

struct pretok {
    pretok_step_t *steps;
    int n;
};

/* A piece of a non-isolating step before its behavior is applied. */
typedef struct span {
    size_t s, e;
    int is_match;
} span_t;

typedef struct span_vec {
    span_t *v;
    size_t n, cap;
} span_vec_t;

/* Recursion depth equals the number of steps; a handful at most. */
#define PRETOK_MAX_STEPS 16

struct pretok_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    span_vec_t spans[PRETOK_MAX_STEPS], out[PRETOK_MAX_STEPS];
    /* Byte-level steps: the piece as byte-level text, and for each offset of
     * that text the byte offset of the piece it starts at. */
    uint8_t *bl[PRETOK_MAX_STEPS];
    size_t *rev[PRETOK_MAX_STEPS], blcap[PRETOK_MAX_STEPS];
};

pretok_t *pretok_new(void) { return fb_calloc(1, sizeof(pretok_t)); }

void pretok_free(pretok_t *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        pcre2_code_free(p->steps[i].code);
        free(p->steps[i].pattern);
    }
    free(p->steps);
    free(p);
}

int pretok_add_split(pretok_t *p, const char *pattern, int literal, pretok_behavior_t behavior, int invert,
                     char *err, size_t errlen)
{
    if (p->n == PRETOK_MAX_STEPS) {
        snprintf(err, errlen, "more than %d pre-tokenizer splits", PRETOK_MAX_STEPS);
        return -1;
    }
    /* UCP: \s, \w, \d and POSIX classes follow Unicode properties, as in the
     * Oniguruma engine Hugging Face uses (PCRE2 refuses UCP with LITERAL,
     * where it means nothing); MATCH_INVALID_UTF: any bytes. */
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &errcode, &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        snprintf(err, errlen, "regex /%s/ at offset %zu: %s", pattern, (size_t)erroff, (const char *)msg);
        return -1;
    }
    p->steps = fb_realloc(p->steps, (size_t)(p->n + 1) * sizeof *p->steps);
    pretok_step_t *st = &p->steps[p->n++];
    st->pattern = fb_strdup(pattern);
    st->literal = literal;
    st->invert = invert;
    st->behavior = behavior;
    st->code = code;
    st->bytelevel = 0;
    /* No JIT (a build or CPU without it) only costs speed. */
    st->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

int pretok_nsteps(const pretok_t *p) { return p->n; }

void pretok_set_bytelevel(pretok_t *p)
{
    FB_ASSERT(p->n > 0);
    p->steps[p->n - 1].bytelevel = 1;
}

int pretok_step_bytelevel(const pretok_t *p, int i)
{
    FB_ASSERT(i >= 0 && i < p->n);
    return p->steps[i].bytelevel;
}

void pretok_step_get(const pretok_t *p, int i, const char **pattern, int *literal, pretok_behavior_t *behavior,
                     int *invert)
{
    FB_ASSERT(i >= 0 && i < p->n);
    *pattern = p->steps[i].pattern;
    *literal = p->steps[i].literal;
    *behavior = p->steps[i].behavior;
    *invert = p->steps[i].invert;
}

const char *pretok_behavior_name(pretok_behavior_t b)
{
    switch (b) {
    case PRETOK_ISOLATED:
        return "isolated";
    case PRETOK_MERGED_WITH_PREVIOUS:
        return "merged_with_previous";
    case PRETOK_MERGED_WITH_NEXT:
        return "merged_with_next";
    case PRETOK_CONTIGUOUS:
        return "contiguous";
    }
    return "?";
}

int pretok_jit_enabled(const pretok_t *p)
{
    for (int i = 0; i < p->n; i++)
        if (!p->steps[i].jit)
            return 0;
    return 1;
}

pretok_scratch_t *pretok_scratch_new(void)
{
    pretok_scratch_t *s = fb_calloc(1, sizeof *s);
    s->md = pcre2_match_data_create(1, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    /* The default JIT stack (32 KiB on the machine stack) is enough for the
     * usual patterns; a larger one keeps exotic ones from failing. */
    s->jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!s->md || !s->mctx || !s->jit_stack)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory creating PCRE2 match data");
    pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
    return s;
}

void pretok_scratch_free(pretok_scratch_t *s)
{
    if (!s)
        return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit_stack);
    for (int i = 0; i < PRETOK_MAX_STEPS; i++) {
        free(s->spans[i].v);
        free(s->out[i].v);
        free(s->bl[i]);
        free(s->rev[i]);
    }
    free(s);
}

static void span_push(span_vec_t *v, size_t s, size_t e, int is_match)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->v = fb_realloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = (span_t){s, e, is_match};
}

/* Where a step's search stands in the text it matches: the next search
 * starts at `pos`; `last_end` is the end of the last match (-1: none). */
typedef struct cursor {
    size_t pos;
    long long last_end;
} cursor_t;

/* The next match of step st in text[0..n), as tokenizers finds them (the
 * onig crate's find_iter): the search goes on from the end of the last
 * match; an empty match right at that end is passed over by moving the
 * search one character on, and any other empty match counts (it cuts the
 * text there: an empty pattern cuts between every two characters). Returns
 * 0 when there is none. */
static int next_match(const pretok_step_t *st, pretok_scratch_t *s, const uint8_t *text, size_t n, cursor_t *c,
                      size_t *ms, size_t *me)
{
    while (c->pos <= n) {
        int rc = st->jit ? pcre2_jit_match(st->code, text, n, c->pos, 0, s->md, s->mctx)
                         : pcre2_match(st->code, text, n, c->pos, 0, s->md, s->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            return 0;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            /* the pattern is the file's: a match limit it hits is its problem */
            fb_fatal(FB_EXIT_DATA, "pre-tokenizer regex /%s/ failed: %s", st->pattern, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        if (ov[1] == ov[0] && (long long)ov[1] == c->last_end) {
            /* one character on: its lead byte and continuation bytes (a
             * byte that is not UTF-8 counts as a character) */
            if (c->pos == n)
                return 0;
            size_t at = c->pos++;
            while (c->pos < n && (text[c->pos] & 0xC0) == 0x80 && c->pos - at < 4)
                c->pos++;
            continue;
        }
        *ms = ov[0];
        *me = ov[1];
        c->pos = ov[1];
        c->last_end = (long long)ov[1];
        return 1;
    }
    return 0;
}

/* The next match of a step, in the offsets of the piece (through to_byte
 * for a byte-level step, whose search runs on mt[0..mn)). */
static int step_match(const pretok_step_t *st, pretok_scratch_t *s, const uint8_t *mt, size_t mn,
                      const size_t *to_byte, cursor_t *c, size_t *ms, size_t *me)
{
    if (!next_match(st, s, mt, mn, c, ms, me))
        return 0;
    if (to_byte) {
        *ms = to_byte[*ms];
        *me = to_byte[*me];
    }
    return 1;
}

static void split_step(const pretok_t *p, pretok_scratch_t *s, int step, const uint8_t *text, size_t n,
                       pretok_piece_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (step == p->n) {
        fn(ctx, text, n);
        return;
    }
    const pretok_step_t *st = &p->steps[step];
    size_t pos = 0, ms, me;
    /* mt[0..mn) is what the regex sees; to_byte maps its offsets to text's. */
    const uint8_t *mt = text;
    size_t mn = n, *to_byte = NULL;
    if (st->bytelevel) {
        if (2 * n + 1 > s->blcap[step]) {
            s->blcap[step] = 2 * (2 * n + 1);
            s->bl[step] = fb_realloc(s->bl[step], s->blcap[step]);
            s->rev[step] = fb_realloc(s->rev[step], s->blcap[step] * sizeof *s->rev[step]);
        }
        mn = 0;
        for (size_t i = 0; i < n; i++) {
            int k = bytelevel_char_utf8(text[i], (char *)s->bl[step] + mn);
            s->rev[step][mn] = i;
            if (k == 2)
                s->rev[step][mn + 1] = i;
            mn += (size_t)k;
        }
        s->rev[step][mn] = n;
        mt = s->bl[step];
        to_byte = s->rev[step];
    }
    cursor_t cur = {0, -1}; /* where the search goes on, in mt */
    if (st->behavior == PRETOK_ISOLATED) {
        /* Matches and gaps alike become pieces, so `invert` changes nothing. */
        while (step_match(st, s, mt, mn, to_byte, &cur, &ms, &me)) {
            split_step(p, s, step + 1, text + pos, ms - pos, fn, ctx);
            split_step(p, s, step + 1, text + ms, me - ms, fn, ctx);
            pos = me;
        }
        split_step(p, s, step + 1, text + pos, n - pos, fn, ctx);
        return;
    }

    span_vec_t *sp = &s->spans[step], *out = &s->out[step];
    sp->n = out->n = 0;
    while (step_match(st, s, mt, mn, to_byte, &cur, &ms, &me)) {
        if (ms > pos)
            span_push(sp, pos, ms, st->invert);
        span_push(sp, ms, me, !st->invert);
        pos = me;
    }
    if (pos < n)
        span_push(sp, pos, n, st->invert);

    /* The folds of Hugging Face's NormalizedString::split. */
    int prev_match = 0;
    if (st->behavior == PRETOK_MERGED_WITH_NEXT) {
        for (size_t i = sp->n; i-- > 0;) {
            span_t x = sp->v[i];
            if (x.is_match && !prev_match && out->n)
                out->v[out->n - 1].s = x.s;
            else
                span_push(out, x.s, x.e, 0);
            prev_match = x.is_match;
        }
        for (size_t i = 0; i < out->n / 2; i++) {
            span_t t = out->v[i];
            out->v[i] = out->v[out->n - 1 - i];
            out->v[out->n - 1 - i] = t;
        }
    } else {
        for (size_t i = 0; i < sp->n; i++) {
            span_t x = sp->v[i];
            int join = st->behavior == PRETOK_MERGED_WITH_PREVIOUS ? x.is_match && !prev_match
                                                                    : x.is_match == prev_match;
            if (join && out->n)
                out->v[out->n - 1].e = x.e;
            else
                span_push(out, x.s, x.e, 0);
            prev_match = x.is_match;
        }
    }
    /* The deeper steps use their own span vectors, so `out` stays valid. */
    for (size_t i = 0; i < out->n; i++)
        split_step(p, s, step + 1, text + out->v[i].s, out->v[i].e - out->v[i].s, fn, ctx);
}

void pretok_split(const pretok_t *p, pretok_scratch_t *s, const uint8_t *text, size_t n, pretok_piece_fn fn,
                  void *ctx)
{
    split_step(p, s, 0, text, n, fn, ctx);
}
