#include "config/config_json.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config_alias.h"
#include "util/error.h"
#include "util/nearest.h"

/* Reals in messages and in the effective config: 16 significant digits give
 * back what a user typed (0.003, not 0.0030000000000000001). */
#define CJ_DUMP_FLAGS (JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(16))

/* ---------------------------------------------------------------- strings */

void cj_strs_push(cj_strs_t *s, const char *str)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->items = fb_realloc(s->items, s->cap * sizeof *s->items);
    }
    s->items[s->n++] = fb_strdup(str);
}

int cj_strs_has(const cj_strs_t *s, const char *str)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], str) == 0)
            return 1;
    return 0;
}

void cj_strs_free(cj_strs_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i]);
    free(s->items);
    memset(s, 0, sizeof *s);
}

void cj_ctx_init(cj_ctx_t *c, int verbose)
{
    memset(c, 0, sizeof *c);
    c->verbose = verbose;
    c->errors = &c->errors_store;
    c->duplicates = &c->duplicates_store;
}

void cj_ctx_free(cj_ctx_t *c)
{
    json_decref(c->root);
    json_decref(c->defaults);
    json_decref(c->user);
    cj_strs_free(&c->known);
    cj_strs_free(&c->autos);
    cj_strs_free(&c->inert);
    cj_strs_free(&c->set_keys);
    cj_strs_free(&c->errors_store);
    cj_strs_free(&c->duplicates_store);
    memset(c, 0, sizeof *c);
}

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    FB_ASSERT(n >= 0);
    char *s = fb_malloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static char *join(const char *prefix, const char *key)
{
    if (!prefix || !*prefix)
        return fb_strdup(key);
    size_t a = strlen(prefix), b = strlen(key);
    char *s = fb_malloc(a + b + 2);
    memcpy(s, prefix, a);
    s[a] = '.';
    memcpy(s + a + 1, key, b + 1);
    return s;
}

static char *dump(const json_t *v)
{
    char *s = json_dumps(v, CJ_DUMP_FLAGS);
    if (!s)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "json_dumps", "out of memory");
    return s;
}

/* ---------------------------------------------------------------- messages */

char *cj_cut(const char *s)
{
    size_t n = strlen(s);
    if (n <= CJ_VALUE_MAX)
        return fb_strdup(s);
    /* cut on a UTF-8 character boundary, so the message stays valid text */
    size_t k = CJ_VALUE_MAX;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    char *out = fb_malloc(k + 4);
    memcpy(out, s, k);
    memcpy(out + k, "...", 4);
    return out;
}

/* Ends the job with the collected errors and `last` (may be NULL): each on
 * its own "fabula: error:" line, rank 0 only. */
_Noreturn static void fail_all(const cj_ctx_t *c, const char *last)
{
    const cj_strs_t *e = c->errors;
    size_t n = e ? e->n : 0;
    if (c->verbose) {
        for (size_t i = 0; i < n; i++)
            if (last || i + 1 < n)
                fprintf(stderr, "fabula: error: %s\n", e->items[i]);
        const char *final = last ? last : e->items[n - 1];
        if (n + (last != NULL) > 1)
            fb_fatal_all(FB_EXIT_USAGE, "%s\nfabula: error: the config has %zu errors (above)", final,
                         n + (last != NULL));
        fb_fatal_all(FB_EXIT_USAGE, "%s", final);
    }
    /* every rank reads the same config and fails here alike; rank 0 says
     * it once (verbose is set on rank 0 only) */
    if (fb_error_rank() > 0)
        fb_fatal_all(FB_EXIT_USAGE, "%s", last ? last : "config errors");
    fflush(stdout);
    exit(FB_EXIT_USAGE);
}

void cj_fail(const cj_ctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    fail_all(c, msg);
}

static void add_error(const cj_ctx_t *c, char *msg)
{
    if (!c->errors)
        fail_all(c, msg);
    /* a bad value read twice (a check on it in two readers) is one error */
    if (!cj_strs_has(c->errors, msg))
        cj_strs_push(c->errors, msg);
    free(msg);
}

void cj_error(const cj_ctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    add_error(c, msg);
}

void cj_invalid(const cj_ctx_t *c, const char *path, const char *expected_fmt, ...)
{
    va_list ap;
    va_start(ap, expected_fmt);
    char *expected = vformat(expected_fmt, ap);
    va_end(ap);
    json_t *v = cj_lookup(NULL, c->root, path);
    char *full = v ? dump(v) : fb_strdup("(absent)");
    char *value = cj_cut(full);
    char *shown = cj_cut(path);
    size_t n = strlen(shown) + strlen(value) + strlen(expected) + 64;
    char *msg = fb_malloc(n);
    snprintf(msg, n, "config key '%s' = %s: expected %s", shown, value, expected);
    free(full);
    free(value);
    free(shown);
    free(expected);
    add_error(c, msg);
}

size_t cj_nerrors(const cj_ctx_t *c) { return c->errors ? c->errors->n : 0; }

void cj_check_errors(const cj_ctx_t *c)
{
    if (cj_nerrors(c) > 0)
        fail_all(c, NULL);
}

/* "fabula: <kind>: <message>" on stderr, on the rank that says things
 * (verbose: rank 0). */
static void say(const cj_ctx_t *c, const char *kind, const char *fmt, va_list ap)
{
    if (!c->verbose)
        return;
    char *msg = vformat(fmt, ap);
    fprintf(stderr, "fabula: %s: %s\n", kind, msg);
    free(msg);
}

void cj_warn(const cj_ctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(c, "warning", fmt, ap);
    va_end(ap);
}

void cj_note(const cj_ctx_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(c, "note", fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- paths */

json_t *cj_lookup(const cj_ctx_t *c, json_t *root, const char *path)
{
    json_t *node = root;
    const char *p = path;
    char key[256];
    for (;;) {
        if (json_is_null(node))
            return NULL;
        if (!json_is_object(node)) {
            if (c) {
                char *prefix = fb_strdup(path);
                prefix[p - path - 1] = '\0';
                cj_invalid(c, prefix, "an object");
                free(prefix);
            }
            return NULL;
        }
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof key)
            return NULL;
        memcpy(key, p, len);
        key[len] = '\0';
        node = json_object_get(node, key);
        if (!node || !dot)
            return node;
        p = dot + 1;
    }
}

int cj_store(json_t *root, const char *path, json_t *value, size_t *bad_len)
{
    json_t *node = root;
    const char *p = path;
    char key[256];
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        FB_ASSERT(len < sizeof key);
        memcpy(key, p, len);
        key[len] = '\0';
        if (!dot) {
            FB_ASSERT(json_object_set_new(node, key, value) == 0);
            return 0;
        }
        json_t *next = json_object_get(node, key);
        if (!next || json_is_null(next)) {
            next = json_object();
            FB_ASSERT(next && json_object_set_new(node, key, next) == 0);
        } else if (!json_is_object(next)) {
            if (bad_len)
                *bad_len = (size_t)(dot - path);
            json_decref(value);
            return -1;
        }
        node = next;
        p = dot + 1;
    }
}

/* Getters store into paths they have just looked up: a step fails only
 * through a non-object on the way, already reported by that lookup. */
void cj_put(const cj_ctx_t *c, const char *path, json_t *value)
{
    FB_ASSERT(value);
    if (cj_store(c->root, path, value, NULL) != 0)
        FB_ASSERT(cj_nerrors(c) > 0);
}

static void store(cj_ctx_t *c, const char *path, json_t *value) { cj_put(c, path, value); }

void cj_remove(json_t *root, const char *path)
{
    const char *dot = strrchr(path, '.');
    json_t *parent = root;
    if (dot) {
        char *prefix = fb_strdup(path);
        prefix[dot - path] = '\0';
        parent = cj_lookup(NULL, root, prefix);
        free(prefix);
    }
    if (json_is_object(parent))
        json_object_del(parent, dot ? dot + 1 : path);
}

int cj_is_auto(const json_t *v) { return json_is_string(v) && strcmp(json_string_value(v), "auto") == 0; }

int cj_given(const cj_ctx_t *c, json_t *root, const char *path)
{
    json_t *v = cj_lookup(c, root, path);
    return v && !json_is_null(v) && !cj_is_auto(v);
}

/* ---------------------------------------------------------------- getters */

typedef enum { PICK_TREE, PICK_DEFAULT, PICK_DEF } pick_t;

/* Where a getter's value comes from. PICK_TREE: *node is the user's value;
 * PICK_DEFAULT: *node is the embedded default's; PICK_DEF: the caller's def. */
static pick_t pick(cj_ctx_t *c, const char *path, int (*type_ok)(const json_t *), json_t **node, int *was_auto)
{
    if (!cj_strs_has(&c->known, path))
        cj_strs_push(&c->known, path);
    *was_auto = 0;
    json_t *v = cj_lookup(c, c->root, path);
    *node = v;
    if (!v)
        return PICK_DEF;
    if (!json_is_null(v) && !cj_is_auto(v))
        return PICK_TREE;
    *was_auto = cj_is_auto(v);
    json_t *d = cj_lookup(NULL, c->defaults, path);
    if (d && type_ok(d)) {
        *node = d;
        return PICK_DEFAULT;
    }
    return PICK_DEF;
}

/* After a type error: what the getter goes on with (the embedded default's
 * value when it has one of the right type, else the caller's def). */
static pick_t fallback(const cj_ctx_t *c, const char *path, int (*type_ok)(const json_t *), json_t **node)
{
    json_t *d = cj_lookup(NULL, c->defaults, path);
    if (d && type_ok(d)) {
        *node = d;
        return PICK_DEFAULT;
    }
    return PICK_DEF;
}

static void record_auto(cj_ctx_t *c, const char *path)
{
    char *value = dump(cj_lookup(NULL, c->root, path));
    size_t n = strlen(path) + strlen(value) + 2;
    char *s = fb_malloc(n);
    snprintf(s, n, "%s=%s", path, value);
    cj_strs_push(&c->autos, s);
    free(s);
    free(value);
}

static int is_number(const json_t *v) { return json_is_number(v); }

static int integral(const json_t *v)
{
    if (json_is_integer(v))
        return 1;
    if (!json_is_real(v))
        return 0;
    double x = json_real_value(v);
    return x == floor(x) && fabs(x) < 9.0e18;
}

static int is_bool(const json_t *v)
{
    return json_is_boolean(v) || (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1));
}

static int is_string(const json_t *v) { return json_is_string(v); }

double cj_real(cj_ctx_t *c, const char *path, double def)
{
    json_t *node;
    int was_auto;
    pick_t from = pick(c, path, is_number, &node, &was_auto);
    if (from == PICK_TREE) {
        if (json_is_number(node))
            return json_number_value(node);
        cj_invalid(c, path, "a number");
        return fallback(c, path, is_number, &node) == PICK_DEFAULT ? json_number_value(node) : def;
    }
    double x = from == PICK_DEFAULT ? json_number_value(node) : def;
    store(c, path, from == PICK_DEFAULT ? json_deep_copy(node) : json_real(x));
    if (was_auto)
        record_auto(c, path);
    return x;
}

long long cj_integer(cj_ctx_t *c, const char *path, long long def)
{
    json_t *node;
    int was_auto;
    pick_t from = pick(c, path, integral, &node, &was_auto);
    long long x = def;
    if (from != PICK_DEF && !integral(node)) {
        cj_invalid(c, path, "an integer");
        if (fallback(c, path, integral, &node) == PICK_DEF)
            return def;
    }
    if (from != PICK_DEF) {
        x = json_is_integer(node) ? (long long)json_integer_value(node) : (long long)json_real_value(node);
    }
    /* 5e8 is a real in JSON; the effective config shows it as the integer. */
    if (from != PICK_TREE || !json_is_integer(node)) {
        store(c, path, json_integer((json_int_t)x));
        if (was_auto)
            record_auto(c, path);
    }
    return x;
}

int cj_int(cj_ctx_t *c, const char *path, int def)
{
    long long x = cj_integer(c, path, def);
    if (x < INT_MIN || x > INT_MAX) {
        cj_invalid(c, path, "an integer in [%d, %d]", INT_MIN, INT_MAX);
        return def;
    }
    return (int)x;
}

int cj_bool(cj_ctx_t *c, const char *path, int def)
{
    json_t *node;
    int was_auto;
    pick_t from = pick(c, path, is_bool, &node, &was_auto);
    int x = def != 0;
    if (from != PICK_DEF && !is_bool(node)) {
        cj_invalid(c, path, "true or false");
        if (fallback(c, path, is_bool, &node) == PICK_DEF)
            return x;
    }
    if (from != PICK_DEF) {
        x = json_is_boolean(node) ? json_is_true(node) : json_integer_value(node) != 0;
    }
    if (from != PICK_TREE || !json_is_boolean(node)) {
        store(c, path, json_boolean(x));
        if (was_auto)
            record_auto(c, path);
    }
    return x;
}

/* The raw text of a --set value for `path`, NULL when none: a --set of a
 * string key keeps its text even when it parses as JSON (--run-dir 2024). */
static const char *set_raw(const cj_ctx_t *c, const char *path)
{
    const char *raw = NULL;
    for (size_t i = 0; i + 1 < c->set_keys.n; i += 2)
        if (strcmp(c->set_keys.items[i], path) == 0)
            raw = c->set_keys.items[i + 1];
    return raw;
}

const char *cj_string(cj_ctx_t *c, const char *path, const char *def)
{
    json_t *node;
    int was_auto;
    pick_t from = pick(c, path, is_string, &node, &was_auto);
    if (from == PICK_TREE) {
        if (json_is_string(node))
            return json_string_value(node);
        const char *raw = set_raw(c, path);
        if (!raw || json_is_object(node) || json_is_array(node)) {
            cj_invalid(c, path, "a string");
            /* the default goes on in its place (the tree is not shown) */
            if (fallback(c, path, is_string, &node) == PICK_DEFAULT)
                return json_string_value(node);
            return def ? def : "";
        }
        store(c, path, json_string(raw));
    } else if (from == PICK_DEFAULT) {
        store(c, path, json_deep_copy(node));
    } else {
        if (!def) {
            cj_invalid(c, path, "a string (this key is required)");
            return "";
        }
        store(c, path, json_string(def));
    }
    if (was_auto)
        record_auto(c, path);
    json_t *now = cj_lookup(NULL, c->root, path);
    /* not a string only when a non-object on the way was reported */
    return json_is_string(now) ? json_string_value(now) : def ? def : "";
}

static int is_number_array(const json_t *v)
{
    if (!json_is_array(v))
        return 0;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_number(json_array_get(v, i)))
            return 0;
    return 1;
}

void cj_reals(cj_ctx_t *c, const char *path, double *out, size_t n, const double *def)
{
    json_t *node;
    int was_auto;
    pick_t from = pick(c, path, is_number_array, &node, &was_auto);
    if (from == PICK_DEF) {
        json_t *a = json_array();
        FB_ASSERT(a);
        for (size_t i = 0; i < n; i++) {
            out[i] = def[i];
            FB_ASSERT(json_array_append_new(a, json_real(def[i])) == 0);
        }
        store(c, path, a);
    } else {
        if (!is_number_array(node) || json_array_size(node) != n) {
            cj_invalid(c, path, "an array of %zu numbers", n);
            memcpy(out, def, n * sizeof *out);
            return;
        }
        for (size_t i = 0; i < n; i++)
            out[i] = json_number_value(json_array_get(node, i));
        if (from == PICK_DEFAULT)
            store(c, path, json_deep_copy(node));
    }
    if (was_auto)
        record_auto(c, path);
}

int cj_section(cj_ctx_t *c, const char *path)
{
    if (!cj_strs_has(&c->known, path))
        cj_strs_push(&c->known, path);
    json_t *v = cj_lookup(c, c->root, path);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        cj_invalid(c, path, "an object");
        return 0;
    }
    return 1;
}

void cj_resolve_auto(cj_ctx_t *c, const char *path, json_t *value)
{
    json_t *v = cj_lookup(c, c->root, path);
    if (!cj_is_auto(v)) {
        json_decref(value);
        return;
    }
    store(c, path, value);
    record_auto(c, path);
}

/* ---------------------------------------------------------------- inert keys */

static int type_matches(const json_t *v, cj_type_t t)
{
    switch (t) {
    case CJ_ANY:
        return 1;
    case CJ_BOOL:
        return is_bool(v);
    case CJ_NUMBER:
        return json_is_number(v);
    case CJ_OBJECT:
        return json_is_object(v);
    case CJ_STRING:
        return json_is_string(v);
    }
    return 0;
}

static const char *type_name(cj_type_t t)
{
    switch (t) {
    case CJ_BOOL:
        return "true or false";
    case CJ_NUMBER:
        return "a number";
    case CJ_OBJECT:
        return "an object";
    case CJ_STRING:
        return "a string";
    case CJ_ANY:
        break;
    }
    return "any value";
}

void cj_accept_inert(cj_ctx_t *c, const char *prefix, const cj_inert_t *table, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *path = join(prefix, table[i].key);
        if (!cj_strs_has(&c->known, path))
            cj_strs_push(&c->known, path);
        json_t *v = cj_lookup(c, c->root, path);
        if (v && !json_is_null(v)) {
            if (!cj_is_auto(v) && !type_matches(v, table[i].type))
                cj_invalid(c, path, "%s", type_name(table[i].type));
            if (!cj_strs_has(&c->inert, path))
                cj_strs_push(&c->inert, path);
        }
        free(path);
    }
}

/* ---------------------------------------------------------------- defaults */

static json_t *default_node(const cj_ctx_t *c, const char *path)
{
    json_t *d = cj_lookup(NULL, c->defaults, path);
    if (!d)
        fb_fatal(FB_EXIT_INTERNAL, "the embedded default config has no '%s'", path);
    return d;
}

long long cj_default_integer(const cj_ctx_t *c, const char *path)
{
    json_t *d = default_node(c, path);
    FB_ASSERT(json_is_integer(d));
    return (long long)json_integer_value(d);
}

double cj_default_real(const cj_ctx_t *c, const char *path)
{
    json_t *d = default_node(c, path);
    FB_ASSERT(json_is_number(d));
    return json_number_value(d);
}

int cj_default_bool(const cj_ctx_t *c, const char *path)
{
    json_t *d = default_node(c, path);
    FB_ASSERT(json_is_boolean(d));
    return json_is_true(d);
}

const char *cj_default_string(const cj_ctx_t *c, const char *path)
{
    json_t *d = default_node(c, path);
    FB_ASSERT(json_is_string(d));
    return json_string_value(d);
}

/* ---------------------------------------------------------------- unknown keys */

/* A path some known path lies below: an object to look into. */
static int is_known_container(const cj_ctx_t *c, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < c->known.n; i++)
        if (strncmp(c->known.items[i], path, n) == 0 && c->known.items[i][n] == '.')
            return 1;
    return 0;
}

static const char *last_part(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* Whether `known` lies directly in the object `parent_len` bytes of `path`
 * name (0: the top level). */
static int same_level(const char *known, const char *path, size_t parent_len)
{
    if (parent_len && (strncmp(known, path, parent_len) != 0 || known[parent_len] != '.'))
        return 0;
    return strchr(known + (parent_len ? parent_len + 1 : 0), '.') == NULL;
}

/* Every known path ranks by: its last part's distance to the unknown
 * one's (the same name elsewhere first: `run.save_interval` is
 * `checkpoint.save_interval` misplaced, not `run.eval_interval` mistyped),
 * then being in the same object, then the whole paths' distance. */
const char *cj_suggest(const cj_ctx_t *c, const char *path)
{
    const char *name = last_part(path);
    const size_t parent_len = name == path ? 0 : (size_t)(name - path - 1);
    const size_t near_name = nearest_close_enough(name), near_path = nearest_close_enough(path);
    const char *best = NULL;
    size_t best_key[3] = {(size_t)-1, 0, 0};
    for (size_t i = 0; i < c->known.n; i++) {
        const char *k = c->known.items[i];
        const size_t dn = nearest_distance(name, last_part(k)), dp = nearest_distance(path, k);
        /* close by its name, or (a mistyped section) by the whole path */
        if (dn > near_name && dp > near_path)
            continue;
        const size_t key[3] = {dn <= near_name ? dn : near_name + 1, !same_level(k, path, parent_len), dp};
        int better = !best;
        for (int j = 0; j < 3 && !better; j++) {
            if (key[j] != best_key[j]) {
                better = key[j] < best_key[j];
                break;
            }
        }
        if (better) {
            best = k;
            memcpy(best_key, key, sizeof key);
        }
    }
    return best;
}

/* An unknown key that another trainer's users type for one of fabula's
 * (config_alias.c): an error naming the key to give, since ignoring it
 * would train with another value than the one written. 1 when it was. */
static int refuse_alias(const cj_ctx_t *c, const char *path)
{
    const config_alias_t *a = config_alias_find(path);
    if (!a)
        return 0;
    char *shown = cj_cut(path);
    const char *how = a->how && *a->how ? a->how : NULL;
    if (!a->key)
        cj_error(c, "config key '%s': %s is %s's setting, which fabula does not have: %s", shown, a->name, a->origin,
                 a->how);
    else if (!strcmp(last_part(a->key), last_part(path)))
        cj_error(c, "config key '%s' is not read there: fabula's key is '%s'", shown, a->key);
    else
        cj_error(c, "config key '%s': %s is %s's name, not fabula's: give '%s'%s%s%s", shown, a->name, a->origin,
                 a->key, how ? " (" : "", how ? how : "", how ? ")" : "");
    free(shown);
    return 1;
}

static void report_unknown(const cj_ctx_t *c, const char *path)
{
    if (refuse_alias(c, path))
        return;
    const char *near = cj_suggest(c, path);
    char hint[320] = "";
    if (near)
        snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    char *shown = cj_cut(path);
    if (c->strict)
        cj_error(c, "unknown config key '%s'%s (an error with --strict / run.strict_config)", shown, hint);
    else
        cj_warn(c, "unknown config key '%s' (ignored%s)", shown, hint);
    free(shown);
}

static void warn_unknown_in(const cj_ctx_t *c, json_t *obj, const char *prefix)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        char *path = join(prefix, key);
        if (c->model_refused && !strcmp(path, "model")) {
            free(path);
            continue;
        }
        if (!cj_strs_has(&c->known, path)) {
            if (json_is_object(val) && is_known_container(c, path))
                warn_unknown_in(c, val, path);
            else
                report_unknown(c, path);
        } else if (json_is_object(val) && is_known_container(c, path)) {
            warn_unknown_in(c, val, path);
        }
        free(path);
    }
}

void cj_warn_unknown(const cj_ctx_t *c) { warn_unknown_in(c, c->root, NULL); }
