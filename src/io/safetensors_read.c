/* safetensors reading (io/safetensors_read.h). */
#include "io/safetensors_read.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "util/error.h"

/* A header larger than this is not a weight file (the format's own reader
 * has the same kind of bound): refused before allocating it. */
#define ST_MAX_HEADER ((uint64_t)100 << 20)

static int fail(char *why, size_t cap, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *why, size_t cap, int code, const char *path, const char *fmt, ...)
{
    int k = snprintf(why, cap, "%s: ", path);
    if (k >= 0 && (size_t)k < cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + k, cap - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return code;
}

static const struct {
    const char *name;
    unsigned size;
    st_dtype_t id;
} dtypes[] = {
    {"F32", 4, ST_F32}, {"BF16", 2, ST_BF16}, {"F16", 2, ST_F16}, {"F64", 8, ST_OTHER},
    {"I64", 8, ST_OTHER}, {"U64", 8, ST_OTHER}, {"I32", 4, ST_OTHER}, {"U32", 4, ST_OTHER},
    {"I16", 2, ST_OTHER}, {"U16", 2, ST_OTHER}, {"I8", 1, ST_OTHER}, {"U8", 1, ST_OTHER},
    {"BOOL", 1, ST_OTHER}, {"F8_E4M3", 1, ST_OTHER}, {"F8_E5M2", 1, ST_OTHER},
};

static unsigned dtype_size(const char *s, st_dtype_t *id)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (!strcmp(s, dtypes[i].name)) {
            *id = dtypes[i].id;
            return dtypes[i].size;
        }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor_t *)a)->name, ((const st_tensor_t *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const st_tensor_t *x = *(const st_tensor_t *const *)a, *y = *(const st_tensor_t *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* One tensor's entry; 0 or FB_EXIT_DATA. */
static int parse_entry(st_tensor_t *t, const char *path, const char *name, json_t *e, uint64_t data0,
                       uint64_t file_size, char *why, size_t cap)
{
    if (!json_is_object(e))
        return fail(why, cap, FB_EXIT_DATA, path, "header entry \"%s\" is not an object", name);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_array_size(off) != 2)
        return fail(why, cap, FB_EXIT_DATA, path,
                    "tensor \"%s\": the header needs \"dtype\" (a string), \"shape\" (an array) and "
                    "\"data_offsets\" ([begin, end])",
                    name);
    if (json_object_size(e) != 3)
        return fail(why, cap, FB_EXIT_DATA, path,
                    "tensor \"%s\": the header entry has keys other than dtype, shape, data_offsets", name);
    unsigned es = dtype_size(json_string_value(dt), &t->dtype);
    if (!es)
        return fail(why, cap, FB_EXIT_DATA, path, "tensor \"%s\": unknown dtype \"%s\"", name,
                    json_string_value(dt));
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", json_string_value(dt));
    if (json_array_size(sh) > ST_MAX_DIMS)
        return fail(why, cap, FB_EXIT_DATA, path, "tensor \"%s\": more than %d dimensions", name, ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    /* elements and bytes without overflow: a product that wraps could
     * match the byte length of a tiny tensor (shape [2^62] of F32 takes
     * "0 bytes"), and a reader would then trust its element count */
    uint64_t numel = 1, bytes;
    int wraps = 0;
    for (int d = 0; d < t->ndim; d++) {
        json_t *s = json_array_get(sh, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return fail(why, cap, FB_EXIT_DATA, path, "tensor \"%s\": shape[%d] is not a non-negative integer",
                        name, d);
        t->shape[d] = json_integer_value(s);
        const uint64_t n = (uint64_t)t->shape[d];
        wraps |= n && numel > UINT64_MAX / n;
        numel *= n;
    }
    wraps |= numel > UINT64_MAX / es;
    bytes = numel * es;
    if (wraps || bytes > file_size)
        return fail(why, cap, FB_EXIT_DATA, path, "tensor \"%s\": its shape times the size of %s is larger than the file (%llu bytes)",
                    name, t->dtype_name, (unsigned long long)file_size);
    t->numel = numel;
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return fail(why, cap, FB_EXIT_DATA, path, "tensor \"%s\": data_offsets must be integers 0 <= begin <= end",
                    name);
    uint64_t lo = (uint64_t)json_integer_value(b), hi = (uint64_t)json_integer_value(en);
    if (hi - lo != bytes)
        return fail(why, cap, FB_EXIT_DATA, path,
                    "tensor \"%s\": data_offsets [%llu, %llu] hold %llu bytes, but %llu elements of %s take %llu",
                    name, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)(hi - lo),
                    (unsigned long long)numel, t->dtype_name, (unsigned long long)bytes);
    if (hi > file_size - data0)
        return fail(why, cap, FB_EXIT_DATA, path,
                    "truncated: tensor \"%s\" ends at byte %llu, but the file has %llu bytes", name,
                    (unsigned long long)(data0 + hi), (unsigned long long)file_size);
    t->begin = data0 + lo;
    t->end = data0 + hi;
    t->name = fb_strdup(name);
    return 0;
}

int st_parse(st_file_t *f, const char *path, const uint8_t *bytes, size_t n, uint64_t file_size, char *why,
             size_t cap)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = fb_strdup(path);
    f->size = file_size;
    if (n < 8 || file_size < 8)
        return fail(why, cap, FB_EXIT_DATA, path, "truncated: %llu bytes, shorter than the 8-byte header length",
                    (unsigned long long)file_size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | bytes[i];
    if (hlen > file_size - 8)
        return fail(why, cap, FB_EXIT_DATA, path,
                    "truncated or not safetensors: the header length %llu is beyond the file's %llu bytes",
                    (unsigned long long)hlen, (unsigned long long)file_size);
    if (hlen > ST_MAX_HEADER || hlen < 2)
        return fail(why, cap, FB_EXIT_DATA, path, "not safetensors: a header length of %llu bytes",
                    (unsigned long long)hlen);
    if (n < 8 + hlen)
        return fail(why, cap, FB_EXIT_DATA, path, "truncated: the header is cut short");
    json_error_t err;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return fail(why, cap, FB_EXIT_DATA, path, "the header is not JSON: %s (at byte %d)", err.text,
                    err.position);
    int code = 0;
    if (!json_is_object(root)) {
        code = fail(why, cap, FB_EXIT_DATA, path, "the header is not a JSON object");
        goto out;
    }
    f->t = fb_calloc(json_object_size(root) + 1, sizeof *f->t);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                code = fail(why, cap, FB_EXIT_DATA, path, "\"__metadata__\" is not an object");
                goto out;
            }
            continue;
        }
        code = parse_entry(&f->t[f->n], path, key, val, 8 + hlen, file_size, why, cap);
        if (code)
            goto out;
        f->n++;
    }
    /* no two tensors share bytes (the format forbids it; a file that does
     * would alias one weight to another) */
    st_tensor_t **order = fb_malloc(((size_t)f->n + 1) * sizeof *order);
    for (int i = 0; i < f->n; i++)
        order[i] = &f->t[i];
    qsort(order, (size_t)f->n, sizeof *order, by_begin);
    for (int i = 1; i < f->n && !code; i++)
        if (order[i]->begin < order[i - 1]->end)
            code = fail(why, cap, FB_EXIT_DATA, path, "tensors \"%s\" and \"%s\" overlap in the file",
                        order[i - 1]->name, order[i]->name);
    free(order);
    if (!code)
        qsort(f->t, (size_t)f->n, sizeof *f->t, by_name);
out:
    json_decref(root);
    return code;
}

int st_open(st_file_t *f, const char *path, char *why, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd;
    int code = regular_file_open(path, &fd, why, cap);
    if (code)
        return code;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail(why, cap, FB_EXIT_IO, path, "cannot stat: %s", strerror(errno));
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t len8[8] = {0};
    ssize_t got = size >= 8 ? pread(fd, len8, 8, 0) : 0;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    size_t want = got == 8 && hlen <= ST_MAX_HEADER && hlen <= size - 8 ? (size_t)(8 + hlen) : (size_t)(got > 0 ? got : 0);
    uint8_t *buf = fb_malloc(want + 1);
    size_t have = 0;
    while (have < want) {
        ssize_t r = pread(fd, buf + have, want - have, (off_t)have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            close(fd);
            return fail(why, cap, FB_EXIT_IO, path, "cannot read the header: %s", r < 0 ? strerror(e) : "short read");
        }
        have += (size_t)r;
    }
    code = st_parse(f, path, buf, have, size, why, cap);
    free(buf);
    if (code) {
        close(fd);
        return code;
    }
    f->fd = fd;
    return 0;
}

void st_close(st_file_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

const st_tensor_t *st_find(const st_file_t *f, const char *name)
{
    st_tensor_t key;
    key.name = (char *)name;
    return f->n ? bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, by_name) : NULL;
}

float st_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf, NaN (payload kept) */
    } else if (exp) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (!man) {
        u = sign;
    } else {
        /* subnormal: man * 2^-24, normalised for fp32 */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int st_read_f32(const st_file_t *f, const st_tensor_t *t, uint64_t lo, uint64_t hi, float *out, char *why,
                size_t cap)
{
    FB_ASSERT(lo <= hi && hi <= t->numel && f->fd >= 0);
    if (t->dtype == ST_OTHER)
        return fail(why, cap, FB_EXIT_DATA, f->path, "tensor \"%s\" is %s: fabula reads F32, BF16 or F16 weights",
                    t->name, t->dtype_name);
    const size_t es = t->dtype == ST_F32 ? 4 : 2;
    const size_t n = (size_t)(hi - lo);
    /* fp32 goes straight into out; 16-bit values into out's back half and
     * are widened in place from the front: out[i] ends at byte 4i + 4, not
     * past the next unread value, which starts at 2n + 2i + 2 */
    uint8_t *dst = t->dtype == ST_F32 ? (uint8_t *)out : (uint8_t *)out + n * 2;
    size_t done = 0, want = n * es;
    const off_t base = (off_t)(t->begin + lo * es);
    while (done < want) {
        ssize_t r = pread(f->fd, dst + done, want - done, base + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return fail(why, cap, FB_EXIT_IO, f->path, "cannot read tensor \"%s\": %s", t->name,
                        r < 0 ? strerror(errno) : "the file is shorter than when it was opened");
        done += (size_t)r;
    }
    if (t->dtype == ST_F32) {
        /* the format is little-endian, as is every machine fabula builds on */
        return 0;
    }
    const uint8_t *src = dst;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        out[i] = t->dtype == ST_BF16 ? st_bf16_to_f32(h) : st_f16_to_f32(h);
    }
    return 0;
}
