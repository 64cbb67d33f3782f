#include "corpus/input_reader.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/novels.h"
#include "corpus/utf8_guard.h"
#include "io/regular_file.h"
#include "util/error.h"

/* A systematic problem would otherwise print one warning per line. */
#define INPUT_MAX_ISSUES_PER_FILE 20
/* A line buffer larger than this is released after each use. */
#define INPUT_BIG_LINE ((size_t)16 << 20)

typedef struct issue {
    int file;
    int64_t line; /* local line (JSONL) or -1 */
    int error;
    char *msg;    /* for line == -1: the text after the path (": item 3: ...") */
} issue_t;

struct input_reader {
    const corpus_inputs_t *in;
    int64_t begin, end;
    int strict, failed;

    int file;          /* current file; -1 before the first */
    FILE *fp;          /* JSON Lines file being read */
    int64_t pos, lend; /* next line start and end of the share, in the file */
    int64_t local_line;
    char *line;
    size_t line_cap;

    json_t *doc;       /* .json document being handed out */
    size_t doc_next, doc_count;
    int doc_guarded;

    uint8_t *content;
    char *title, *language;

    int64_t *lines;
    int *issues_per_file;
    issue_t *issues;
    int nissues, cap_issues;
    input_read_counts_t counts;
};

static void reader_issue(input_reader_t *r, int64_t line, int error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reader_issue(input_reader_t *r, int64_t line, int error, const char *fmt, ...)
{
    if (r->issues_per_file[r->file]++ >= INPUT_MAX_ISSUES_PER_FILE && !error)
        return;
    if (r->nissues == r->cap_issues) {
        r->cap_issues = r->cap_issues ? 2 * r->cap_issues : 32;
        r->issues = fb_realloc(r->issues, (size_t)r->cap_issues * sizeof *r->issues);
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->issues[r->nissues++] = (issue_t){.file = r->file, .line = line, .error = error, .msg = fb_strdup(buf)};
}

input_reader_t *input_reader_open(const corpus_inputs_t *in, int64_t begin, int64_t end, int strict)
{
    input_reader_t *r = fb_calloc(1, sizeof *r);
    r->in = in;
    r->begin = begin;
    r->end = end;
    r->strict = strict;
    r->file = -1;
    r->lines = fb_calloc((size_t)in->n + 1, sizeof *r->lines);
    r->issues_per_file = fb_calloc((size_t)in->n + 1, sizeof *r->issues_per_file);
    return r;
}

static int64_t invalid_utf8_count(const uint8_t *s, size_t n)
{
    int64_t bad = 0;
    for (size_t i = 0; i < n;) {
        int k = utf8_guard_seqlen(s + i, n - i);
        if (k == 0) {
            bad++;
            k = 1;
        }
        i += (size_t)k;
    }
    return bad;
}

/* Fills *rec from a JSON value, or records why it is skipped (0). `pre`
 * goes between the path (or PATH:LINE) and the message of an issue. */
static int record_take(input_reader_t *r, const json_t *obj, int guarded, input_record_t *rec, const char *pre)
{
    novel_record_t nr;
    novels_record_read(&nr, obj);
    if (nr.status == NOVEL_RECORD_NOT_OBJECT) {
        r->counts.malformed++;
        reader_issue(r, rec->line, r->strict, "%sexpected a JSON object (a novel)%s", pre, r->strict ? "" : ", skipped");
        if (r->strict)
            r->failed = 1;
        return 0;
    }
    if (nr.status == NOVEL_RECORD_NO_CONTENT) {
        r->counts.no_content++;
        /* --strict: a record with nothing to train on is as wrong as one
         * that is not a novel at all */
        reader_issue(r, rec->line, r->strict, "%s%s%s", pre, nr.why, r->strict ? "" : ", skipped");
        if (r->strict)
            r->failed = 1;
        return 0;
    }
    free(r->content);
    free(r->title);
    free(r->language);
    r->title = r->language = NULL;
    r->content = novels_json_string_copy(nr.content, guarded, &rec->len);
    rec->content = r->content;
    rec->invalid_utf8 = guarded ? invalid_utf8_count(r->content, rec->len) : 0;
    if (rec->invalid_utf8) {
        r->counts.invalid_utf8_records++;
        r->counts.invalid_utf8_bytes += rec->invalid_utf8;
        reader_issue(r, rec->line, 0, "%sinvalid UTF-8: %lld byte%s of \"content\" kept as they are", pre,
                     (long long)rec->invalid_utf8, rec->invalid_utf8 == 1 ? "" : "s");
    }

    rec->genre = nr.genre;
    if (nr.genre_issue == NOVEL_GENRE_UNKNOWN) {
        r->counts.other_genre++;
        reader_issue(r, rec->line, 0, "%sunknown genre \"%.100s\", read as \"other\"", pre, nr.genre_name);
    } else if (nr.genre_issue == NOVEL_GENRE_NOT_STRING) {
        r->counts.other_genre++;
        reader_issue(r, rec->line, 0, "%s\"genre\" is not a string, read as \"other\"", pre);
    }
    size_t len;
    if (nr.title)
        r->title = (char *)novels_json_string_copy(nr.title, guarded, &len);
    const json_t *language = json_object_get(obj, "language");
    if (json_is_string(language))
        r->language = (char *)novels_json_string_copy(language, guarded, &len);
    rec->title = r->title;
    rec->language = r->language;
    return 1;
}

static int line_is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

/* Opens file r->file for reading if this share holds any of it; 0 if not. */
static int reader_enter_file(input_reader_t *r)
{
    const corpus_input_file_t *f = &r->in->files[r->file];
    if (f->is_document) {
        if (f->start < r->begin || f->start >= r->end)
            return 0;
        size_t n;
        uint8_t *buf = novels_file_read(f->path, "input", &n);
        r->counts.bytes_read += (int64_t)n;
        size_t skip = n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF ? 3 : 0;
        json_error_t err;
        int guarded = 0;
        char dup[256];
        json_t *root = novels_json_parse(buf + skip, (size_t)n - skip, &guarded, dup, sizeof dup, &err);
        free(buf);
        if (root && dup[0])
            reader_issue(r, -1, 0, ": duplicate key '%s' (the last value is used)", dup);
        if (!root) {
            r->counts.malformed++;
            if (err.line > 0)
                reader_issue(r, -1, r->strict, ":%d:%d: %s", err.line, err.column, err.text);
            else
                reader_issue(r, -1, r->strict, ": %s", err.text);
            if (r->strict)
                r->failed = 1;
            return 0;
        }
        r->doc = root;
        r->doc_guarded = guarded;
        r->doc_next = 0;
        r->doc_count = json_is_array(root) ? json_array_size(root) : 1;
        return 1;
    }
    int64_t lb = r->begin > f->start ? r->begin - f->start : 0;
    int64_t le = r->end - f->start < f->size ? r->end - f->start : f->size;
    if (lb >= f->size || le <= lb)
        return 0;
    char why[1024];
    int code = regular_file_fopen(f->path, &r->fp, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot open input %s: %s", f->path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    if (setvbuf(r->fp, NULL, _IOFBF, 1 << 20) != 0)
        fb_fatal(FB_EXIT_IO, "cannot set a read buffer for %s", f->path);
    r->pos = 0;
    if (lb > 0) {
        /* The first line of the share starts right after the first '\n' at
         * or after position lb - 1. */
        if (fseeko(r->fp, (off_t)(lb - 1), SEEK_SET) != 0)
            fb_fatal(FB_EXIT_IO, "cannot seek in input %s: %s", f->path, strerror(errno));
        ssize_t got = getline(&r->line, &r->line_cap, r->fp);
        if (got < 0 && ferror(r->fp))
            fb_fatal(FB_EXIT_IO, "cannot read input %s: %s", f->path, strerror(errno));
        r->pos = lb - 1 + (got > 0 ? got : 0);
    }
    r->lend = le;
    r->local_line = 0;
    return 1;
}

static void reader_leave_file(input_reader_t *r)
{
    if (r->fp) {
        fclose(r->fp);
        r->fp = NULL;
    }
    if (r->doc) {
        json_decref(r->doc);
        r->doc = NULL;
    }
    /* A 50 MB line should not keep its buffer for the rest of the run. */
    free(r->line);
    r->line = NULL;
    r->line_cap = 0;
}

/* The next record of the current JSONL file: 1, or 0 when it is done. */
static int reader_next_line(input_reader_t *r, input_record_t *rec)
{
    const corpus_input_file_t *f = &r->in->files[r->file];
    while (r->pos < r->lend) {
        ssize_t got = getline(&r->line, &r->line_cap, r->fp);
        if (got < 0) {
            if (ferror(r->fp))
                fb_fatal(FB_EXIT_IO, "cannot read input %s: %s", f->path, strerror(errno));
            break;
        }
        int64_t start = r->pos;
        r->pos += got;
        int64_t line = r->local_line++;
        r->lines[r->file]++;
        r->counts.bytes_read += got;
        if (r->failed)
            continue; /* --strict stopped: only the line numbers matter now */
        const char *text = r->line;
        size_t n = (size_t)got;
        if (start == 0 && n >= 3 && (uint8_t)text[0] == 0xEF && (uint8_t)text[1] == 0xBB && (uint8_t)text[2] == 0xBF) {
            text += 3;
            n -= 3;
        }
        if (line_is_blank(text, n))
            continue;
        json_error_t err;
        int guarded = 0;
        char dup[256];
        json_t *obj = novels_json_parse((const uint8_t *)text, n, &guarded, dup, sizeof dup, &err);
        if (r->line_cap > INPUT_BIG_LINE) {
            /* Parsed: a huge line's buffer goes before its content is copied. */
            free(r->line);
            r->line = NULL;
            r->line_cap = 0;
        }
        *rec = (input_record_t){.file = r->file, .line = line, .item = 0};
        if (!obj) {
            r->counts.malformed++;
            reader_issue(r, line, r->strict, "%s", err.text);
            if (r->strict)
                r->failed = 1;
            continue;
        }
        if (dup[0])
            reader_issue(r, line, 0, "duplicate key '%s' (the last value is used)", dup);
        int ok = record_take(r, obj, guarded, rec, "");
        json_decref(obj);
        if (ok)
            return 1;
    }
    return 0;
}

static int reader_next_item(input_reader_t *r, input_record_t *rec)
{
    while (!r->failed && r->doc_next < r->doc_count) {
        size_t i = r->doc_next++;
        const json_t *obj = json_is_array(r->doc) ? json_array_get(r->doc, i) : r->doc;
        *rec = (input_record_t){.file = r->file, .line = -1, .item = (int64_t)i + 1};
        char pre[64];
        if (json_is_array(r->doc))
            snprintf(pre, sizeof pre, ": item %zu: ", i + 1);
        else
            strcpy(pre, ": ");
        if (record_take(r, obj, r->doc_guarded, rec, pre))
            return 1;
    }
    return 0;
}

int input_reader_next(input_reader_t *r, input_record_t *rec)
{
    for (;;) {
        if (r->fp && reader_next_line(r, rec))
            return 1;
        if (r->doc && reader_next_item(r, rec))
            return 1;
        if (r->file >= 0)
            reader_leave_file(r);
        if (r->file + 1 >= r->in->n)
            return 0;
        r->file++;
        reader_enter_file(r);
    }
}

const input_read_counts_t *input_reader_counts(const input_reader_t *r) { return &r->counts; }
int input_reader_failed(const input_reader_t *r) { return r->failed; }
const int64_t *input_reader_lines(const input_reader_t *r) { return r->lines; }

void input_reader_report(const input_reader_t *r, const int64_t *line_base)
{
    for (int i = 0; i < r->nissues; i++) {
        const issue_t *is = &r->issues[i];
        const char *path = r->in->files[is->file].path;
        const char *kind = is->error ? "error" : "warning";
        if (is->line >= 0)
            fprintf(stderr, "fabula: %s: %s:%lld: %s%s\n", kind, path, (long long)(line_base[is->file] + is->line + 1),
                    is->msg, is->error ? " (--strict: stopped)" : "");
        else
            fprintf(stderr, "fabula: %s: %s%s%s\n", kind, path, is->msg, is->error ? " (--strict: stopped)" : "");
    }
    for (int f = 0; f < r->in->n; f++)
        if (r->issues_per_file[f] > INPUT_MAX_ISSUES_PER_FILE)
            fb_warn("%s: %d further warnings suppressed (the totals below count them)", r->in->files[f].path,
                    r->issues_per_file[f] - INPUT_MAX_ISSUES_PER_FILE);
    fflush(stderr);
}

void input_reader_close(input_reader_t *r)
{
    if (!r)
        return;
    if (r->file >= 0 && r->file < r->in->n)
        reader_leave_file(r);
    for (int i = 0; i < r->nissues; i++)
        free(r->issues[i].msg);
    free(r->issues);
    free(r->issues_per_file);
    free(r->lines);
    free(r->content);
    free(r->title);
    free(r->language);
    free(r->line);
    free(r);
}
