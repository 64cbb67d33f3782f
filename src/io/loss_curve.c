#include "io/loss_curve.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/strbuf.h"

const char *const curve_real_names[CURVE_NREAL] = {"loss",     "lm_loss", "aux_loss",   "z_loss",
                                                   "grad_norm", "lr",      "loss_scale", "valid_lm_loss"};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

void loss_curve_alloc(loss_curve_t *c, long steps, int moe_layers, int experts)
{
    FB_ASSERT(steps >= 1 && moe_layers >= 0 && experts >= 0);
    c->steps = steps;
    c->moe_layers = moe_layers;
    c->experts = experts;
    for (int q = 0; q < CURVE_NREAL; q++)
        c->real[q] = fb_calloc((size_t)steps, sizeof(double));
    for (long i = 0; i < steps; i++)
        c->real[CURVE_VALID_LM_LOSS][i] = NAN;
    c->dropped = fb_calloc((size_t)steps, sizeof *c->dropped);
    c->tokens_per_expert = fb_calloc((size_t)steps * (size_t)moe_layers * (size_t)experts + 1, sizeof(int64_t));
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

static int get_int(json_t *root, const char *key, long lo, long hi, long *out, const char *path, char *err,
                   size_t cap)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return fail(err, cap, "loss curve %s: \"%s\" %s (an integer from %ld to %ld)", path, key,
                    v ? "is out of range or not an integer" : "is missing", lo, hi);
    *out = (long)json_integer_value(v);
    return 0;
}

/* One record of "records": step i+1's quantities. */
static int read_record(json_t *r, long i, loss_curve_t *c, const char *path, char *err, size_t cap)
{
    if (!json_is_object(r))
        return fail(err, cap, "loss curve %s: \"records\"[%ld] is not an object", path, i);
    json_t *st = json_object_get(r, "step");
    if (!json_is_integer(st) || json_integer_value(st) != i + 1)
        return fail(err, cap, "loss curve %s: \"records\"[%ld]: \"step\" is not %ld", path, i, i + 1);
    for (int q = 0; q < CURVE_NREAL; q++) {
        json_t *x = json_object_get(r, curve_real_names[q]);
        /* null: no finite value (no validation pass this step; the
         * gradient norm of an fp16 step skipped on overflow) */
        if (json_is_null(x)) {
            c->real[q][i] = NAN;
            continue;
        }
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return fail(err, cap, "loss curve %s: step %ld: \"%s\" is %s", path, i + 1, curve_real_names[q],
                        x ? "not a finite number or null" : "missing");
        c->real[q][i] = json_number_value(x);
    }
    json_t *d = json_object_get(r, "dropped");
    if (!json_is_integer(d) || json_integer_value(d) < 0)
        return fail(err, cap, "loss curve %s: step %ld: \"dropped\" is not a count", path, i + 1);
    c->dropped[i] = json_integer_value(d);
    json_t *tpe = json_object_get(r, "tokens_per_expert");
    if (!json_is_array(tpe) || json_array_size(tpe) != (size_t)c->moe_layers)
        return fail(err, cap, "loss curve %s: step %ld: \"tokens_per_expert\" is not %d rows (moe_layers)", path,
                    i + 1, c->moe_layers);
    for (int l = 0; l < c->moe_layers; l++) {
        json_t *row = json_array_get(tpe, (size_t)l);
        if (!json_is_array(row) || json_array_size(row) != (size_t)c->experts)
            return fail(err, cap, "loss curve %s: step %ld: \"tokens_per_expert\"[%d] is not %d counts (experts)",
                        path, i + 1, l, c->experts);
        for (int e = 0; e < c->experts; e++) {
            json_t *x = json_array_get(row, (size_t)e);
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                return fail(err, cap, "loss curve %s: step %ld: \"tokens_per_expert\"[%d][%d] is not a count",
                            path, i + 1, l, e);
            c->tokens_per_expert[((size_t)i * (size_t)c->moe_layers + (size_t)l) * (size_t)c->experts + (size_t)e] =
                json_integer_value(x);
        }
    }
    return 0;
}

int loss_curve_read(const char *path, loss_curve_t *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    json_t *root = json_file_load(path, "loss curve", err, cap);
    if (!root)
        return -1;
    int rc = -1;
    json_t *fmt = json_object_get(root, "format");
    json_t *ver = json_object_get(root, "version");
    json_t *recs = json_object_get(root, "records");
    long ws = 0, steps = 0, layers = 0, experts = 0;
    if (!json_is_object(root)) {
        fail(err, cap, "loss curve %s: not a JSON object", path);
        goto out;
    }
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), LOSS_CURVE_FORMAT) != 0) {
        fail(err, cap, "loss curve %s: \"format\" is not \"%s\"", path, LOSS_CURVE_FORMAT);
        goto out;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != LOSS_CURVE_VERSION) {
        fail(err, cap, "loss curve %s: \"version\" is not %d, the one this fabula reads (a curve of version 1 "
                       "holds only losses: write it again with validation/make_curves.sh)", path,
             LOSS_CURVE_VERSION);
        goto out;
    }
    if (get_string(root, "name", &c->name, path, err, cap) || get_string(root, "job", &c->job, path, err, cap) ||
        get_string(root, "backend", &c->backend, path, err, cap) ||
        get_string(root, "precision", &c->precision, path, err, cap) ||
        get_string(root, "layout", &c->layout, path, err, cap) ||
        get_string(root, "blas", &c->blas, path, err, cap) ||
        get_string(root, "fabula_version", &c->fabula_version, path, err, cap) ||
        get_string(root, "environment", &c->environment, path, err, cap) ||
        get_int(root, "world_size", 1, 1 << 24, &ws, path, err, cap) ||
        get_int(root, "steps", 1, 1L << 30, &steps, path, err, cap) ||
        get_int(root, "moe_layers", 0, 1 << 16, &layers, path, err, cap) ||
        get_int(root, "experts", 0, 1 << 20, &experts, path, err, cap))
        goto out;
    c->world_size = (int)ws;
    if (!json_is_array(recs) || json_array_size(recs) != (size_t)steps) {
        fail(err, cap, "loss curve %s: \"records\" is not an array of \"steps\" (%ld) records", path, steps);
        goto out;
    }
    loss_curve_alloc(c, steps, (int)layers, (int)experts);
    for (long i = 0; i < steps; i++)
        if (read_record(json_array_get(recs, (size_t)i), i, c, path, err, cap))
            goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc)
        loss_curve_free(c);
    return rc;
}

/* s as a JSON string literal (NULL: not valid UTF-8). */
static char *quoted(const char *s)
{
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return q;
}

int loss_curve_write(const char *path, const loss_curve_t *c, char *err, size_t cap)
{
    /* written by hand rather than by json_dumps, so that each step is one
     * line (a diff of two curves reads step by step) */
    const char *keys[] = {"name", "job", "backend", "precision", "layout", "blas", "fabula_version", "environment"};
    const char *vals[] = {c->name, c->job, c->backend, c->precision, c->layout, c->blas, c->fabula_version,
                          c->environment};
    strbuf_t b = {0};
    sb_printf(&b, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n", LOSS_CURVE_FORMAT, LOSS_CURVE_VERSION);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char *q = quoted(vals[k]);
        if (!q) {
            sb_free(&b);
            return fail(err, cap, "loss curve %s: the %s is not valid UTF-8", path, keys[k]);
        }
        sb_printf(&b, "  \"%s\": %s,\n", keys[k], q);
        free(q);
    }
    sb_printf(&b, "  \"world_size\": %d,\n  \"steps\": %ld,\n  \"moe_layers\": %d,\n  \"experts\": %d,\n",
              c->world_size, c->steps, c->moe_layers, c->experts);
    sb_printf(&b, "  \"records\": [\n");
    for (long i = 0; i < c->steps; i++) {
        sb_printf(&b, "    {\"step\": %ld", i + 1);
        for (int q = 0; q < CURVE_NREAL; q++) {
            if (!isfinite(c->real[q][i]))
                sb_printf(&b, ", \"%s\": null", curve_real_names[q]);
            else
                sb_printf(&b, ", \"%s\": %.17g", curve_real_names[q], c->real[q][i]);
        }
        sb_printf(&b, ", \"dropped\": %lld, \"tokens_per_expert\": [", (long long)c->dropped[i]);
        for (int l = 0; l < c->moe_layers; l++) {
            sb_printf(&b, "%s[", l ? ", " : "");
            for (int e = 0; e < c->experts; e++)
                sb_printf(&b, "%s%lld", e ? ", " : "",
                          (long long)c->tokens_per_expert[((size_t)i * (size_t)c->moe_layers + (size_t)l) *
                                                              (size_t)c->experts + (size_t)e]);
            sb_printf(&b, "]");
        }
        sb_printf(&b, "]}%s\n", i + 1 < c->steps ? "," : "");
    }
    sb_printf(&b, "  ]\n}\n");
    atomic_write_file(path, b.s, b.n);
    sb_free(&b);
    return 0;
}

void loss_curve_free(loss_curve_t *c)
{
    free(c->name);
    free(c->job);
    free(c->backend);
    free(c->precision);
    free(c->layout);
    free(c->blas);
    free(c->fabula_version);
    free(c->environment);
    for (int q = 0; q < CURVE_NREAL; q++)
        free(c->real[q]);
    free(c->dropped);
    free(c->tokens_per_expert);
    memset(c, 0, sizeof *c);
}
