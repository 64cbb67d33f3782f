#include "util/json_scan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define PATH_MAX_LEN 200

typedef struct scan {
    const char *s;
    size_t n, i;
    int line;
    char path[PATH_MAX_LEN + 1];
    size_t path_len;
    void (*dup)(void *, const char *, int, int);
    void *ctx;
    size_t ndup;
} scan_t;

static void skip_ws(scan_t *sc)
{
    while (sc->i < sc->n) {
        char ch = sc->s[sc->i];
        if (ch == '\n')
            sc->line++;
        else if (ch != ' ' && ch != '\t' && ch != '\r')
            return;
        sc->i++;
    }
}

/* At an opening quote: moves past the closing one. */
static void skip_string(scan_t *sc)
{
    sc->i++;
    while (sc->i < sc->n) {
        const char *q = memchr(sc->s + sc->i, '"', sc->n - sc->i);
        if (!q) {
            sc->i = sc->n;
            return;
        }
        size_t at = (size_t)(q - sc->s), bs = 0;
        while (at - bs > sc->i && sc->s[at - bs - 1] == '\\')
            bs++;
        sc->i = at + 1;
        if (bs % 2 == 0)
            return;
    }
}

/* Appends ".key" or "[i]" to the path (cut when too long); returns the old
 * length to restore. */
static size_t path_push(scan_t *sc, const char *part, size_t len, int index)
{
    size_t old = sc->path_len;
    char buf[32];
    if (index >= 0) {
        int k = snprintf(buf, sizeof buf, "[%d]", index);
        part = buf;
        len = (size_t)k;
    } else if (sc->path_len > 0 && sc->path_len < PATH_MAX_LEN) {
        sc->path[sc->path_len++] = '.';
    }
    size_t room = PATH_MAX_LEN - sc->path_len;
    if (len > room)
        len = room;
    memcpy(sc->path + sc->path_len, part, len);
    sc->path_len += len;
    sc->path[sc->path_len] = '\0';
    return old;
}

static void path_pop(scan_t *sc, size_t old)
{
    sc->path_len = old;
    sc->path[old] = '\0';
}

static void scan_value(scan_t *sc, int depth);

typedef struct span {
    size_t at, len;
    int line;
} span_t;

static void scan_object(scan_t *sc, int depth)
{
    sc->i++;
    span_t *keys = NULL;
    size_t nkeys = 0, cap = 0;
    for (;;) {
        skip_ws(sc);
        if (sc->i >= sc->n || sc->s[sc->i] == '}') {
            sc->i++;
            break;
        }
        if (sc->s[sc->i] == ',') {
            sc->i++;
            continue;
        }
        if (sc->s[sc->i] != '"') { /* not JSON: stop scanning */
            sc->i = sc->n;
            break;
        }
        size_t at = sc->i + 1;
        int line = sc->line;
        skip_string(sc);
        size_t len = sc->i - 1 - at;
        for (size_t k = 0; k < nkeys; k++) {
            if (keys[k].len == len && memcmp(sc->s + keys[k].at, sc->s + at, len) == 0) {
                size_t old = path_push(sc, sc->s + at, len, -1);
                sc->ndup++;
                sc->dup(sc->ctx, sc->path, keys[k].line, line);
                path_pop(sc, old);
                break;
            }
        }
        if (nkeys == cap) {
            cap = cap ? 2 * cap : 8;
            keys = fb_realloc(keys, cap * sizeof *keys);
        }
        keys[nkeys++] = (span_t){at, len, line};
        skip_ws(sc);
        if (sc->i < sc->n && sc->s[sc->i] == ':')
            sc->i++;
        size_t old = path_push(sc, sc->s + at, len, -1);
        scan_value(sc, depth + 1);
        path_pop(sc, old);
    }
    free(keys);
}

static void scan_array(scan_t *sc, int depth)
{
    sc->i++;
    for (int index = 0;; index++) {
        skip_ws(sc);
        if (sc->i >= sc->n || sc->s[sc->i] == ']') {
            sc->i++;
            return;
        }
        if (sc->s[sc->i] == ',') {
            sc->i++;
            index--;
            continue;
        }
        size_t old = path_push(sc, NULL, 0, index);
        scan_value(sc, depth + 1);
        path_pop(sc, old);
    }
}

static void scan_value(scan_t *sc, int depth)
{
    skip_ws(sc);
    if (sc->i >= sc->n)
        return;
    /* jansson refuses deeper nesting (2048) before this could matter */
    if (depth > 4096) {
        sc->i = sc->n;
        return;
    }
    char ch = sc->s[sc->i];
    if (ch == '{')
        scan_object(sc, depth);
    else if (ch == '[')
        scan_array(sc, depth);
    else if (ch == '"')
        skip_string(sc);
    else
        while (sc->i < sc->n && !strchr(",]} \t\r\n", sc->s[sc->i]))
            sc->i++;
}

size_t json_scan_duplicates(const char *text, size_t n,
                            void (*dup)(void *ctx, const char *path, int first_line, int line),
                            void *ctx)
{
    scan_t sc = {.s = text, .n = n, .line = 1, .dup = dup, .ctx = ctx};
    sc.path[0] = '\0';
    scan_value(&sc, 0);
    return sc.ndup;
}

/* ---------------------------------------------------------------- numbers */

/* What a number token needs: 0 as is, 1 ".0" appended, 2 null. */
static int number_fix(const char *tok, size_t len)
{
    char buf[64];
    int integer = 1;
    for (size_t k = 0; k < len; k++)
        integer &= tok[k] != '.' && tok[k] != 'e' && tok[k] != 'E';
    if (integer) {
        size_t digits = len - (tok[0] == '-');
        if (digits < 19)
            return 0;
        if (len < sizeof buf) {
            memcpy(buf, tok, len);
            buf[len] = '\0';
            errno = 0;
            (void)strtoll(buf, NULL, 10);
            if (errno != ERANGE)
                return 0;
        }
        /* as a double unless even that overflows (over 308 digits) */
        return digits > 308 ? 2 : 1;
    }
    char *copy = fb_malloc(len + 1);
    memcpy(copy, tok, len);
    copy[len] = '\0';
    errno = 0;
    double v = strtod(copy, NULL);
    free(copy);
    return isinf(v) ? 2 : 0;
}

char *json_scan_tame_numbers(const char *text, size_t n, size_t *out_n)
{
    char *out = NULL;
    size_t on = 0, cap = 0, copied = 0;
    for (size_t i = 0; i < n;) {
        char ch = text[i];
        if (ch == '"') {
            scan_t sc = {.s = text, .n = n, .i = i};
            skip_string(&sc);
            i = sc.i;
            continue;
        }
        if (ch != '-' && (ch < '0' || ch > '9')) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && strchr("+-0123456789.eE", text[i]))
            i++;
        int fix = number_fix(text + start, i - start);
        if (!fix)
            continue;
        size_t need = on + (start - copied) + (i - start) + 8;
        if (need > cap) {
            cap = need > 2 * cap ? need + n / 8 + 64 : 2 * cap;
            out = fb_realloc(out, cap);
        }
        memcpy(out + on, text + copied, start - copied);
        on += start - copied;
        if (fix == 1) {
            memcpy(out + on, text + start, i - start);
            on += i - start;
            memcpy(out + on, ".0", 2);
            on += 2;
        } else {
            memcpy(out + on, "null", 4);
            on += 4;
        }
        copied = i;
    }
    if (!out)
        return NULL;
    out = fb_realloc(out, on + (n - copied) + 1);
    memcpy(out + on, text + copied, n - copied);
    on += n - copied;
    out[on] = '\0';
    *out_n = on;
    return out;
}
