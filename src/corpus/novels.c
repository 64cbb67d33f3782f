#include "corpus/novels.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tokenizer/bytetok.h"
#include "io/data_path.h"
#include "corpus/utf8_guard.h"
#include "io/regular_file.h"
#include "util/error.h"
#include "util/json_scan.h"

/* A corpus with a systematic problem would otherwise print one warning per
 * line; the counts still appear in the summary. */
#define NOVELS_MAX_WARNINGS 20

typedef struct load_ctx {
    const char *path;
    int warnings;
    int capacity;
    const char *unit; /* what a malformed piece is called: "line" or "item" */
} load_ctx_t;

static void ctx_warn(load_ctx_t *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ctx_warn(load_ctx_t *ctx, const char *fmt, ...)
{
    ctx->warnings++;
    if (ctx->warnings > NOVELS_MAX_WARNINGS) {
        if (ctx->warnings == NOVELS_MAX_WARNINGS + 1)
            fb_warn("%s: further warnings about this file suppressed", ctx->path);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fb_warn("%s", msg);
}

uint8_t *novels_file_read(const char *path, const char *what, size_t *n)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = fb_malloc(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = fb_realloc(buf, cap);
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                fb_fatal(FB_EXIT_IO, "cannot read %s %s: %s", what, path, strerror(errno));
            break;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

uint8_t *novels_json_string_copy(const json_t *s, int guarded, size_t *len)
{
    size_t n = json_string_length(s);
    uint8_t *p = fb_malloc(n + 1);
    memcpy(p, json_string_value(s), n);
    if (guarded)
        n = utf8_guard_unwrap(p, n);
    p[n] = '\0';
    *len = n;
    return p;
}

typedef struct first_dup {
    char *buf;
    size_t cap;
} first_dup_t;

static void note_dup(void *ctx, const char *path, int first_line, int line)
{
    (void)first_line;
    (void)line;
    first_dup_t *d = ctx;
    if (!d->buf[0])
        snprintf(d->buf, d->cap, "%s", path);
}

json_t *novels_json_parse(const uint8_t *text, size_t n, int *guarded, char *dup, size_t dupcap, json_error_t *err)
{
    uint8_t *wrapped;
    size_t wn;
    long bad = utf8_guard_wrap(text, n, &wrapped, &wn);
    if (bad < 0) {
        snprintf(err->text, sizeof err->text,
                 "invalid UTF-8 together with code points U+10FF00..U+10FFFF; cannot keep its bytes exactly");
        err->line = -1;
        err->column = -1;
        return NULL;
    }
    *guarded = bad > 0;
    const char *src = bad ? (const char *)wrapped : (const char *)text;
    size_t sn = bad ? wn : n;
    json_t *root = json_loadb(src, sn, JSON_ALLOW_NUL, err);
    if (!root) {
        size_t tn;
        char *tamed = json_scan_tame_numbers(src, sn, &tn);
        if (tamed)
            root = json_loadb(tamed, tn, JSON_ALLOW_NUL, err);
        free(tamed);
    }
    if (root && dup && dupcap) {
        dup[0] = '\0';
        first_dup_t d = {dup, dupcap};
        json_scan_duplicates(src, sn, note_dup, &d);
    }
    free(wrapped);
    return root;
}

void novels_record_read(novel_record_t *rec, const json_t *obj)
{
    *rec = (novel_record_t){.status = NOVEL_RECORD_OK, .genre = GENRE_UNKNOWN};
    if (!json_is_object(obj)) {
        rec->status = NOVEL_RECORD_NOT_OBJECT;
        return;
    }
    const json_t *content = json_object_get(obj, "content");
    rec->why = !content                            ? "no \"content\" field"
               : !json_is_string(content)          ? "\"content\" is not a string"
               : json_string_length(content) == 0 ? "empty \"content\""
                                                   : NULL;
    if (rec->why) {
        rec->status = NOVEL_RECORD_NO_CONTENT;
        return;
    }
    rec->content = content;

    const json_t *genre = json_object_get(obj, "genre");
    if (genre && !json_is_null(genre)) {
        if (json_is_string(genre)) {
            int unknown;
            rec->genre = bytetok_genre_id(json_string_value(genre), &unknown);
            if (unknown) {
                rec->genre_issue = NOVEL_GENRE_UNKNOWN;
                rec->genre_name = json_string_value(genre);
            }
        } else {
            rec->genre = GENRE_OTHER;
            rec->genre_issue = NOVEL_GENRE_NOT_STRING;
        }
    }
    const json_t *title = json_object_get(obj, "title");
    rec->title = json_is_string(title) ? title : NULL;
}

/* Adds the novel in `obj` (from `where`, "FILE:LINE") or explains why not. */
static void record_add(load_ctx_t *ctx, novel_set_t *set, const json_t *obj, const char *where, int guarded)
{
    novel_record_t rec;
    novels_record_read(&rec, obj);
    if (rec.status == NOVEL_RECORD_NOT_OBJECT) {
        ctx_warn(ctx, "%s: expected a JSON object (a novel), skipped", where);
        set->n_malformed++;
        return;
    }
    if (rec.status == NOVEL_RECORD_NO_CONTENT) {
        ctx_warn(ctx, "%s: %s, skipped", where, rec.why);
        set->n_no_content++;
        return;
    }

    novel_t nv = {0};
    nv.content = novels_json_string_copy(rec.content, guarded, &nv.len);
    nv.genre = rec.genre;
    if (rec.genre_issue == NOVEL_GENRE_UNKNOWN) {
        ctx_warn(ctx, "%s: unknown genre \"%s\", read as \"other\"", where, rec.genre_name);
        set->n_other_genre++;
    } else if (rec.genre_issue == NOVEL_GENRE_NOT_STRING) {
        ctx_warn(ctx, "%s: \"genre\" is not a string, read as \"other\"", where);
        set->n_other_genre++;
    }
    if (rec.title) {
        size_t tl;
        nv.title = (char *)novels_json_string_copy(rec.title, guarded, &tl);
    }

    if (set->n == ctx->capacity) {
        ctx->capacity = ctx->capacity ? 2 * ctx->capacity : 16;
        set->novels = fb_realloc(set->novels, (size_t)ctx->capacity * sizeof *set->novels);
    }
    set->novels[set->n++] = nv;
    set->total_bytes += nv.len;
}

static int line_is_blank(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

static void load_jsonl(load_ctx_t *ctx, novel_set_t *set, const uint8_t *buf, size_t n)
{
    char where[64 + 4096];
    long lineno = 0;
    for (size_t pos = 0; pos < n;) {
        const uint8_t *nl = memchr(buf + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - buf) : n;
        const uint8_t *line = buf + pos;
        size_t len = end - pos;
        pos = end + 1;
        lineno++;
        if (line_is_blank(line, len))
            continue;
        snprintf(where, sizeof where, "%s:%ld", ctx->path, lineno);
        json_error_t err;
        int guarded = 0;
        char dup[256];
        json_t *obj = novels_json_parse(line, len, &guarded, dup, sizeof dup, &err);
        if (!obj) {
            ctx_warn(ctx, "%s: %s", where, err.text);
            set->n_malformed++;
            continue;
        }
        if (dup[0])
            ctx_warn(ctx, "%s: duplicate key '%s' (the last value is used)", where, dup);
        record_add(ctx, set, obj, where, guarded);
        json_decref(obj);
    }
}

static void load_json(load_ctx_t *ctx, novel_set_t *set, const uint8_t *buf, size_t n)
{
    json_error_t err;
    int guarded = 0;
    char dup[256];
    json_t *root = novels_json_parse(buf, n, &guarded, dup, sizeof dup, &err);
    if (root && dup[0])
        ctx_warn(ctx, "%s: duplicate key '%s' (the last value is used)", ctx->path, dup);
    if (!root) {
        if (err.line > 0)
            fb_fatal(FB_EXIT_DATA, "%s:%d:%d: %s", ctx->path, err.line, err.column, err.text);
        fb_fatal(FB_EXIT_DATA, "%s: %s", ctx->path, err.text);
    }
    char where[64 + 4096];
    if (json_is_array(root)) {
        size_t i;
        json_t *item;
        json_array_foreach(root, i, item) {
            snprintf(where, sizeof where, "%s: item %zu", ctx->path, i + 1);
            record_add(ctx, set, item, where, guarded);
        }
    } else if (json_is_object(root)) {
        record_add(ctx, set, root, ctx->path, guarded);
    } else {
        fb_fatal(FB_EXIT_DATA, "%s: expected a JSON object (a novel) or an array of objects", ctx->path);
    }
    json_decref(root);
}

static int path_is_json_document(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) && strcasecmp(dot, ".json") == 0;
}

void novels_load(novel_set_t *set, const char *path)
{
    memset(set, 0, sizeof *set);
    char *resolved = data_path_resolve(path);
    int document = path_is_json_document(resolved);
    load_ctx_t ctx = {.path = resolved, .unit = document ? "item" : "line"};

    size_t n;
    uint8_t *buf = novels_file_read(resolved, "corpus", &n);
    /* A byte-order mark is an encoding signature, not text. */
    size_t skip = n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF ? 3 : 0;
    if (document)
        load_json(&ctx, set, buf + skip, n - skip);
    else
        load_jsonl(&ctx, set, buf + skip, n - skip);
    free(buf);

    if (set->n_malformed)
        fb_warn("%s: skipped %ld malformed %s%s", resolved, set->n_malformed, ctx.unit,
                set->n_malformed == 1 ? "" : "s");
    if (set->n_no_content)
        fb_warn("%s: skipped %ld record%s without usable \"content\"", resolved, set->n_no_content,
                set->n_no_content == 1 ? "" : "s");
    if (set->n_other_genre)
        fb_warn("%s: %ld record%s with an unrecognised genre read as \"other\"", resolved, set->n_other_genre,
                set->n_other_genre == 1 ? "" : "s");
    if (set->n == 0)
        fb_fatal(FB_EXIT_DATA,
                 "%s: no usable novel (%ld malformed, %ld without content); each %s must be a JSON object "
                 "with a non-empty \"content\" string",
                 resolved, set->n_malformed, set->n_no_content, ctx.unit);
    free(resolved);
}

void novels_free(novel_set_t *set)
{
    for (int i = 0; i < set->n; i++) {
        free(set->novels[i].content);
        free(set->novels[i].title);
    }
    free(set->novels);
    memset(set, 0, sizeof *set);
}
