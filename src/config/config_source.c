#include "config/config_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/regular_file.h"
#include "util/error.h"
#include "util/json_scan.h"

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

typedef struct dup_ctx {
    const cj_ctx_t *c;
    const char *path;
} dup_ctx_t;

/* jansson keeps a duplicate key's last value silently; DeepSpeed loads its
 * config with an object_pairs_hook that raises on a duplicate, and so
 * fabula refuses one too: which of the two values the user meant is not
 * known. Reported with the config's other errors (exit 2). */
static void note_duplicate(void *ctx, const char *key, int first_line, int line)
{
    const dup_ctx_t *d = ctx;
    char *shown = cj_cut(key);
    size_t len = strlen(d->path) + strlen(shown) + 160;
    char *msg = fb_malloc(len);
    snprintf(msg, len, "%s:%d: duplicate key '%s', given first on line %d: which value is meant is unclear (DeepSpeed "
             "refuses such a file too); keep one", d->path, line, shown, first_line);
    cj_strs_push(d->c->duplicates, msg);
    free(msg);
    free(shown);
}

json_t *source_load_file(const cj_ctx_t *c, const char *path)
{
    FILE *f = NULL;
    char why[1024];
    /* a FIFO or a device as the config would block or never end */
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        cj_fail(c, "cannot read config file '%s': %s", path, strerror(errno));
    if (code)
        cj_fail(c, "cannot read config file: %s", why);
    /* read whole, so that the text can be scanned for duplicate keys */
    size_t n = 0, cap = 4096;
    char *text = fb_malloc(cap);
    errno = 0;
    for (;;) {
        if (n == cap)
            text = fb_realloc(text, cap *= 2);
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        cj_fail(c, "cannot read config file '%s': %s", path, strerror(errno ? errno : EIO));
    fclose(f);
    json_error_t err;
    json_t *j = json_loadb(text, n, 0, &err);
    if (!j)
        cj_fail(c, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    dup_ctx_t d = {c, path};
    json_scan_duplicates(text, n, note_duplicate, &d);
    free(text);
    if (!json_is_object(j))
        cj_fail(c, "%s: expected a JSON object at the top level, found %s", path, json_type_name(j));
    return j;
}

void source_merge(json_t *dst, const json_t *src)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)src, key, val) {
        json_t *cur = json_object_get(dst, key);
        if (json_is_object(cur) && json_is_object(val)) {
            source_merge(cur, val);
        } else {
            json_t *copy = json_deep_copy(val);
            FB_ASSERT(copy && json_object_set_new(dst, key, copy) == 0);
        }
    }
}

void source_set_parse(const cj_ctx_t *c, const char *arg, source_set_t *out)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        cj_fail(c, "--set '%s': expected KEY=VALUE with a dotted KEY (optimizer.params.lr=1e-3)", cj_cut(arg));
    out->path = fb_malloc((size_t)(eq - arg) + 1);
    memcpy(out->path, arg, (size_t)(eq - arg));
    out->path[eq - arg] = '\0';
    const char *p = out->path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len == 0 || len >= 256)
            cj_fail(c, "--set '%s': key '%s' has an empty or overlong component", arg, out->path);
        if (!dot)
            break;
        p = dot + 1;
    }
    out->raw = fb_strdup(eq + 1);
    json_error_t err;
    out->value = json_loads(out->raw, JSON_DECODE_ANY, &err);
    if (!out->value)
        out->value = json_string(out->raw);
    if (!out->value)
        cj_fail(c, "--set '%s': the value is neither JSON nor valid UTF-8 text", cj_cut(arg));
}

void source_set_free(source_set_t *s)
{
    free(s->path);
    free(s->raw);
    json_decref(s->value);
    memset(s, 0, sizeof *s);
}

void source_set_apply(const cj_ctx_t *c, json_t *root, const source_set_t *s, int strict)
{
    size_t bad = 0;
    while (cj_store(root, s->path, json_deep_copy(s->value), &bad) != 0) {
        char *prefix = fb_strdup(s->path);
        prefix[bad] = '\0';
        if (strict) {
            json_t *v = cj_lookup(NULL, root, prefix);
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            char *raw = cj_cut(s->raw), *shown = cj_cut(text ? text : "?");
            cj_fail(c, "--set %s=%s: '%s' is %s (%s), not an object", s->path, raw, prefix, json_type_name(v),
                    shown);
        }
        /* The user tree only decides which defaults apply; the strict pass
         * over the merged tree reports the conflict. */
        FB_ASSERT(cj_store(root, prefix, json_object(), NULL) == 0);
        free(prefix);
    }
}
