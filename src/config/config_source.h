/* Where the config tree comes from: JSON files, the deep merge, and --set
 * overrides. Internal to src/config. */
#ifndef FABULA_CONFIG_CONFIG_SOURCE_H
#define FABULA_CONFIG_CONFIG_SOURCE_H

#include <jansson.h>

#include "config/config_json.h"

/* The top-level object of a JSON file. Missing or unreadable file: error
 * naming it and the system's reason; malformed JSON: "FILE:LINE:COLUMN:
 * message". A key given twice in one object keeps its last value and is
 * recorded in c->duplicates (a warning, or an error with strict_config). */
json_t *source_load_file(const cj_ctx_t *c, const char *path);

/* Merges `src` into `dst`: objects recursively, any other value replaces. */
void source_merge(json_t *dst, const json_t *src);

/* One --set "a.b.c=VALUE": VALUE is JSON if it parses (with JSON_DECODE_ANY),
 * else the bare string. */
typedef struct source_set {
    char *path;
    char *raw;
    json_t *value;
} source_set_t;

void source_set_parse(const cj_ctx_t *c, const char *arg, source_set_t *out);
void source_set_free(source_set_t *s);

/* Applies a set to `root`, creating missing objects. A path through a value
 * that is not an object is an error when `strict`, else that value is
 * replaced by an object. */
void source_set_apply(const cj_ctx_t *c, json_t *root, const source_set_t *s, int strict);

#endif
