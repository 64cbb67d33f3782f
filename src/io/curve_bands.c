#include "io/curve_bands.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_file.h"
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
        return fail(err, cap, "bands file %s: \"%s\" %s (docs/validation-format.md \"Bands\")", path, key,
                    v ? "is not a string" : "is missing");
    *out = fb_strdup(json_string_value(v));
    return 0;
}

static int get_nonneg(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
        return -1;
    *out = json_number_value(v);
    return 0;
}

int curve_bands_read(const char *path, curve_bands_t *b, char *err, size_t cap)
{
    memset(b, 0, sizeof *b);
    json_t *root = json_file_load(path, "bands file", err, cap);
    if (!root)
        return -1;
    int rc = -1;
    json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    json_t *qs = json_object_get(root, "quantities");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), CURVE_BANDS_FORMAT) != 0 || !json_is_integer(ver) ||
        json_integer_value(ver) != CURVE_BANDS_VERSION) {
        fail(err, cap, "bands file %s: not a \"%s\" file of version %d", path, CURVE_BANDS_FORMAT,
             CURVE_BANDS_VERSION);
        goto out;
    }
    if (get_string(root, "job", &b->job, path, err, cap) ||
        get_string(root, "derivation", &b->derivation, path, err, cap) ||
        get_string(root, "checked", &b->checked, path, err, cap))
        goto out;
    if (!json_is_object(qs)) {
        fail(err, cap, "bands file %s: \"quantities\" is not an object", path);
        goto out;
    }
    for (int q = 0; q < CURVE_NREAL; q++) {
        json_t *o = json_object_get(qs, curve_real_names[q]);
        json_t *by = json_is_object(o) ? json_object_get(o, "band_by_step") : NULL;
        if (!json_is_object(o) || get_nonneg(o, "spread", &b->spread[q]) || get_nonneg(o, "band", &b->band[q]) ||
            !json_is_array(by) || json_array_size(by) == 0 ||
            (q > 0 && (long)json_array_size(by) != b->steps)) {
            fail(err, cap, "bands file %s: \"quantities\".\"%s\" is not {\"spread\": x, \"band\": y, "
                           "\"band_by_step\": [...]} with finite x, y >= 0 and as many steps as the others",
                 path, curve_real_names[q]);
            goto out;
        }
        b->steps = (long)json_array_size(by);
        b->band_by_step[q] = fb_malloc((size_t)b->steps * sizeof(double));
        for (long i = 0; i < b->steps; i++) {
            json_t *x = json_array_get(by, (size_t)i);
            if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) < 0) {
                fail(err, cap, "bands file %s: \"%s\".band_by_step[%ld] is not a finite number >= 0", path,
                     curve_real_names[q], i);
                goto out;
            }
            b->band_by_step[q][i] = json_number_value(x);
        }
    }
    rc = 0;
out:
    json_decref(root);
    if (rc)
        curve_bands_free(b);
    return rc;
}

void curve_bands_free(curve_bands_t *b)
{
    free(b->job);
    free(b->derivation);
    free(b->checked);
    for (int q = 0; q < CURVE_NREAL; q++)
        free(b->band_by_step[q]);
    memset(b, 0, sizeof *b);
}
