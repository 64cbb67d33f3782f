/* Reading the merged config tree by dotted path ("optimizer.params.lr").
 *
 * Every getter records the path as known (so that the keys nobody read can be
 * reported as unknown), resolves "auto" and null, checks the JSON type, and
 * writes the resolved value back into the tree, which then is the effective
 * config. Errors name the dotted key, the value and what was expected.
 * Internal to src/config.
 */
#ifndef FABULA_CONFIG_CONFIG_JSON_H
#define FABULA_CONFIG_CONFIG_JSON_H

#include <jansson.h>
#include <stddef.h>

typedef struct cj_strs {
    char **items;
    size_t n, cap;
} cj_strs_t;

typedef struct cj_ctx {
    json_t *root;         /* the merged tree; resolved values are written back */
    json_t *defaults;     /* the embedded default: what "auto" resolves to */
    json_t *user;         /* the user's files and --set merged, without the default */
    int verbose;          /* print errors, warnings and notes (rank 0) */
    cj_strs_t known;      /* paths read or accepted */
    cj_strs_t autos;      /* "path=value" for every "auto" resolved */
    cj_strs_t inert;      /* paths given but accepted without effect */
    cj_strs_t set_keys;   /* --set paths and their raw text, pairwise */
    int strict;           /* run.strict_config / --strict: unknown keys are errors */
    /* the first config file that speaks DeepSpeed (its batch, optimizer,
     * scheduler, precision or ZeRO keys; config.c), whose missing keys take
     * DeepSpeed's defaults where fabula's default config differs; NULL: none */
    const char *deepspeed_file;
    /* model.model_type names an architecture fabula refuses: the model
     * section's other keys are not reported as unknown (the refusal says it) */
    int model_refused;
    /* The user errors found so far: reading goes on past a bad key (with
     * the default in its place) so that one run reports them all. Through a
     * pointer, so that readers holding a const context can add to it. */
    cj_strs_t *errors;
    cj_strs_t errors_store;
    /* "FILE:LINE: duplicate key 'PATH'" for each key a file gives twice,
     * reported once run.strict_config is known (a warning, or an error) */
    cj_strs_t *duplicates;
    cj_strs_t duplicates_store;
} cj_ctx_t;

void cj_strs_push(cj_strs_t *s, const char *str);
int cj_strs_has(const cj_strs_t *s, const char *str);
void cj_strs_free(cj_strs_t *s);

void cj_ctx_init(cj_ctx_t *c, int verbose);
void cj_ctx_free(cj_ctx_t *c);

/* A user error after which nothing more can be checked (an unreadable file):
 * the errors collected so far, this one, and exit FB_EXIT_USAGE. Ranks that
 * do not print wait for rank 0 to end the job, so its message is seen. */
_Noreturn void cj_fail(const cj_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A user error that does not stop the reading: collected, reported with the
 * others by cj_check_errors. */
void cj_error(const cj_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cj_error "config key 'PATH' = VALUE: expected ..." with VALUE as found in
 * the tree (cut to CJ_VALUE_MAX characters). The caller goes on with a
 * usable value (the default) in place of the bad one. */
void cj_invalid(const cj_ctx_t *c, const char *path, const char *expected_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Every collected error (rank 0), then exit FB_EXIT_USAGE; nothing if none. */
void cj_check_errors(const cj_ctx_t *c);
/* The number of errors collected so far. */
size_t cj_nerrors(const cj_ctx_t *c);
/* `s` as a message shows it: at most CJ_VALUE_MAX characters, else cut with
 * "..." (a 20 MB value is not echoed). A new string. */
#define CJ_VALUE_MAX 80
char *cj_cut(const char *s);
void cj_warn(const cj_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cj_note(const cj_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The node at `path` in `root`, NULL when absent. A non-object on the way
 * (other than null) is an error naming it when `c` is given. */
json_t *cj_lookup(const cj_ctx_t *c, json_t *root, const char *path);
/* Sets `path` to `value` (reference stolen), creating objects on the way and
 * replacing nulls. A non-object on the way: returns -1 with *bad_len (when
 * not NULL) the length of the prefix of `path` naming it. */
int cj_store(json_t *root, const char *path, json_t *value, size_t *bad_len);
/* cj_store into c->root of a path the caller has looked up: a non-object on
 * the way has been reported by that lookup (value released, nothing stored). */
void cj_put(const cj_ctx_t *c, const char *path, json_t *value);
/* Removes `path` if present. */
void cj_remove(json_t *root, const char *path);
int cj_is_auto(const json_t *v);
/* Present in the tree and neither null nor "auto". */
int cj_given(const cj_ctx_t *c, json_t *root, const char *path);

/* Typed getters on c->root. Absent: `def`. "auto" or null: the embedded
 * default's value at the same path when it has one of the right type, else
 * `def` ("auto" is recorded for the note). */
double cj_real(cj_ctx_t *c, const char *path, double def);
long long cj_integer(cj_ctx_t *c, const char *path, long long def);
int cj_int(cj_ctx_t *c, const char *path, int def);
int cj_bool(cj_ctx_t *c, const char *path, int def);
/* Points into c->root (valid until the tree is freed). */
const char *cj_string(cj_ctx_t *c, const char *path, const char *def);
/* A JSON array of exactly n numbers. */
void cj_reals(cj_ctx_t *c, const char *path, double *out, size_t n, const double *def);
/* Marks an object path as a section (known even when empty); it must be an
 * object or absent. Returns 1 when present. */
int cj_section(cj_ctx_t *c, const char *path);

/* The embedded default's value at `path` (which it must have): the default of
 * keys the default config always sets (model, data, run). */
long long cj_default_integer(const cj_ctx_t *c, const char *path);
double cj_default_real(const cj_ctx_t *c, const char *path);
int cj_default_bool(const cj_ctx_t *c, const char *path);
const char *cj_default_string(const cj_ctx_t *c, const char *path);

/* When `path` holds "auto", replaces it by `value` (stolen; else released)
 * and records it: for keys whose "auto" means something else than the
 * default's value (warmup_max_lr -> the optimizer's lr). */
void cj_resolve_auto(cj_ctx_t *c, const char *path, json_t *value);

/* DeepSpeed keys fabula accepts without effect. */
typedef enum { CJ_ANY, CJ_BOOL, CJ_NUMBER, CJ_OBJECT, CJ_STRING } cj_type_t;
typedef struct cj_inert {
    const char *key;
    cj_type_t type;
} cj_inert_t;
/* Records each present `prefix.key` of the table as known and inert. */
void cj_accept_inert(cj_ctx_t *c, const char *prefix, const cj_inert_t *table, size_t n);

/* One warning per key of c->root that nobody read (full dotted path), with
 * the nearest known key when one is close ("did you mean ..."); with
 * c->strict an error instead. */
void cj_warn_unknown(const cj_ctx_t *c);
/* The known path nearest to the unknown `path` (same level first, then any
 * path), NULL when none is close. Points into c->known. */
const char *cj_suggest(const cj_ctx_t *c, const char *path);

#endif
