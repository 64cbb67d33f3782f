/* checkpoint.mpi_info and prep.mpi_info: MPI-IO hints, a JSON object of
 * string values handed to MPI as they are (docs/config.md). MPI's info
 * values are strings, and a number would have to be formatted by fabula in
 * some way the MPI library may not parse: so a non-string is refused. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "util/error.h"

/* The hints of object `obj` named `path` into *out; the first problem as a
 * new string in *err (then *out is left empty). */
static int hints_from_object(json_t *obj, const char *path, mpi_hints_t *out, char **err)
{
    const char *key;
    json_t *val;
    char buf[512];
    if (!json_is_object(obj)) {
        snprintf(buf, sizeof buf, "'%s': expected a JSON object of string values, e.g. "
                 "{\"romio_cb_write\": \"enable\", \"cb_nodes\": \"4\"}", path);
        *err = fb_strdup(buf);
        return -1;
    }
    json_object_foreach(obj, key, val) {
        if (!*key || !json_is_string(val)) {
            char *text = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(buf, sizeof buf, "'%s.%s' = %s: expected a string (MPI-IO hint values are strings: \"4\", "
                     "not 4)%s", path, key, text ? text : "?", *key ? "" : "; the key is empty");
            free(text);
            *err = fb_strdup(buf);
            mpi_hints_free(out);
            return -1;
        }
        mpi_hints_add(out, key, json_string_value(val));
    }
    return 0;
}

int config_mpi_hints_parse(const char *text, const char *path, mpi_hints_t *out, char **err)
{
    memset(out, 0, sizeof *out);
    *err = NULL;
    json_error_t je;
    json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!obj) {
        char buf[512];
        snprintf(buf, sizeof buf, "'%s': not JSON (%s): expected an object of string values", path, je.text);
        *err = fb_strdup(buf);
        return -1;
    }
    int rc = hints_from_object(obj, path, out, err);
    json_decref(obj);
    return rc;
}

void config_read_mpi_info(cj_ctx_t *c, const char *path, mpi_hints_t *out)
{
    memset(out, 0, sizeof *out);
    cj_strs_push(&c->known, path);
    json_t *v = cj_lookup(c, c->root, path);
    if (!v || json_is_null(v))
        return;
    if (json_is_object(v)) {
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            size_t n = strlen(path) + strlen(key) + 2;
            char *child = fb_malloc(n);
            snprintf(child, n, "%s.%s", path, key);
            cj_strs_push(&c->known, child);
            free(child);
        }
    }
    char *err = NULL;
    if (hints_from_object(v, path, out, &err) != 0) {
        cj_error(c, "config key %s", err);
        free(err);
    }
}
