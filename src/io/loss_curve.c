#include "io/loss_curve.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/regular_file.h"
#include "util/error.h"

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static int get_string(json_t *root, const char *key, char **out, const char *path, char *err, size_t cap)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_string(v))
        return fail(err, cap, "loss curve %s: \"%s\" %s (docs/validation-format.md)", path, key,
                    v ? "is not a string" : "is missing");
    *out = fb_strdup(json_string_value(v));
    return 0;
}

int loss_curve_read(const char *path, loss_curve_t *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    char why[1024];
    if (regular_file_check(path, why, sizeof why) == FB_EXIT_DATA)
        return fail(err, cap, "loss curve %s", why);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        FILE *f = fopen(path, "r");
        if (!f)
            return fail(err, cap, "cannot read loss curve %s (give a curve name of validation/curves, or a path)",
                        path);
        fclose(f);
        return fail(err, cap, "loss curve %s: not JSON: %s at line %d column %d", path, je.text, je.line,
                    je.column);
    }
    int rc = -1;
    json_t *fmt = json_object_get(root, "format");
    json_t *ver = json_object_get(root, "version");
    json_t *ws = json_object_get(root, "world_size");
    json_t *loss = json_object_get(root, "loss");
    if (!json_is_object(root)) {
        fail(err, cap, "loss curve %s: not a JSON object", path);
        goto out;
    }
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), LOSS_CURVE_FORMAT) != 0) {
        fail(err, cap, "loss curve %s: \"format\" is not \"%s\"", path, LOSS_CURVE_FORMAT);
        goto out;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) < 1 || json_integer_value(ver) > LOSS_CURVE_VERSION) {
        fail(err, cap, "loss curve %s: \"version\" is not an integer from 1 to %d (this fabula reads up to %d)",
             path, LOSS_CURVE_VERSION, LOSS_CURVE_VERSION);
        goto out;
    }
    if (get_string(root, "name", &c->name, path, err, cap) || get_string(root, "job", &c->job, path, err, cap) ||
        get_string(root, "backend", &c->backend, path, err, cap) ||
        get_string(root, "precision", &c->precision, path, err, cap) ||
        get_string(root, "blas", &c->blas, path, err, cap) ||
        get_string(root, "fabula_version", &c->fabula_version, path, err, cap) ||
        get_string(root, "environment", &c->environment, path, err, cap))
        goto out;
    if (!json_is_integer(ws) || json_integer_value(ws) < 1 || json_integer_value(ws) > 1 << 24) {
        fail(err, cap, "loss curve %s: \"world_size\" is not a positive integer", path);
        goto out;
    }
    c->world_size = (int)json_integer_value(ws);
    if (!json_is_array(loss) || json_array_size(loss) == 0) {
        fail(err, cap, "loss curve %s: \"loss\" is not a non-empty array of numbers", path);
        goto out;
    }
    c->steps = (long)json_array_size(loss);
    json_t *st = json_object_get(root, "steps");
    if (!json_is_integer(st) || json_integer_value(st) != c->steps) {
        fail(err, cap, "loss curve %s: \"steps\" is not the length of \"loss\" (%ld)", path, c->steps);
        goto out;
    }
    c->loss = fb_malloc((size_t)c->steps * sizeof *c->loss);
    for (long i = 0; i < c->steps; i++) {
        json_t *x = json_array_get(loss, (size_t)i);
        if (!json_is_number(x) || !isfinite(json_number_value(x))) {
            fail(err, cap, "loss curve %s: \"loss\"[%ld] (step %ld) is not a finite number", path, i, i + 1);
            goto out;
        }
        c->loss[i] = json_number_value(x);
    }
    rc = 0;
out:
    json_decref(root);
    if (rc)
        loss_curve_free(c);
    return rc;
}

int loss_curve_write(const char *path, const loss_curve_t *c, char *err, size_t cap)
{
    /* written by hand rather than by json_dumps, so that the losses come one
     * a line (a diff of two curves reads step by step) */
    size_t n = 4096 + (strlen(c->environment) + strlen(c->blas)) * 6 + (size_t)c->steps * 32;
    char *buf = fb_malloc(n);
    json_t *env = json_string(c->environment);
    json_t *ver = json_string(c->fabula_version);
    json_t *blas = json_string(c->blas);
    char *env_s = env ? json_dumps(env, JSON_ENCODE_ANY) : NULL;
    char *ver_s = ver ? json_dumps(ver, JSON_ENCODE_ANY) : NULL;
    char *blas_s = blas ? json_dumps(blas, JSON_ENCODE_ANY) : NULL;
    json_decref(env);
    json_decref(ver);
    json_decref(blas);
    if (!env_s || !ver_s || !blas_s) {
        free(env_s);
        free(ver_s);
        free(blas_s);
        free(buf);
        return fail(err, cap, "loss curve %s: the environment, BLAS or version is not valid UTF-8", path);
    }
    size_t o = (size_t)snprintf(buf, n,
                                "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"name\": \"%s\",\n"
                                "  \"job\": \"%s\",\n  \"backend\": \"%s\",\n  \"precision\": \"%s\",\n"
                                "  \"world_size\": %d,\n  \"blas\": %s,\n  \"fabula_version\": %s,\n  \"environment\": %s,\n"
                                "  \"steps\": %ld,\n  \"loss\": [\n",
                                LOSS_CURVE_FORMAT, LOSS_CURVE_VERSION, c->name, c->job, c->backend, c->precision,
                                c->world_size, blas_s, ver_s, env_s, c->steps);
    free(blas_s);
    free(env_s);
    free(ver_s);
    for (long i = 0; i < c->steps && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "    %.17g%s\n", c->loss[i], i + 1 < c->steps ? "," : "");
    if (o < n)
        o += (size_t)snprintf(buf + o, n - o, "  ]\n}\n");
    FB_ASSERT(o < n);
    atomic_write_file(path, buf, o);
    free(buf);
    return 0;
}

void loss_curve_free(loss_curve_t *c)
{
    free(c->name);
    free(c->job);
    free(c->backend);
    free(c->precision);
    free(c->blas);
    free(c->fabula_version);
    free(c->environment);
    free(c->loss);
    memset(c, 0, sizeof *c);
}
