/* The safetensors reader (io/safetensors_read.h) on hand-built byte strings:
 * well-formed files read back exactly (fp32, bf16 and fp16 widened, any
 * element range), and every kind of malformed header refused with a message
 * naming the file and the problem. fp16 widening is checked on all 65536
 * values against ldexp of the format's definition. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors_read.h"
#include "testlib.h"
#include "util/error.h"

/* header JSON + data bytes, as a file's bytes; length in *n */
static uint8_t *build(const char *header, const void *data, size_t ndata, size_t *n)
{
    size_t h = strlen(header);
    *n = 8 + h + ndata;
    uint8_t *b = testlib_scratch(*n + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (ndata)
        memcpy(b + 8 + h, data, ndata);
    return b;
}

/* st_parse of the bytes fails with FB_EXIT_DATA and a message holding `want` */
static void refused(const char *what, const uint8_t *b, size_t n, uint64_t size, const char *want)
{
    st_file_t f;
    char why[512] = "";
    int code = st_parse(&f, "x.safetensors", b, n, size, why, sizeof why);
    EXPECT(code == FB_EXIT_DATA && strstr(why, want) && !strncmp(why, "x.safetensors: ", 15),
           "%s: code %d, message \"%s\" (wanted \"%s\")", what, code, why, want);
    st_close(&f);
}

static void refused_header(const char *what, const char *header, size_t ndata, const char *want)
{
    static const uint8_t zeros[64];
    size_t n;
    const uint8_t *b = build(header, zeros, ndata, &n);
    refused(what, b, n, n, want);
}

static double f16_reference(unsigned h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_widen(void)
{
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float x = st_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 31;
        if (e == 31)
            bad += (h & 1023) ? !isnan(x) : !(isinf(x) && (x < 0) == (h >> 15));
        else
            bad += (double)x != f16_reference(h) || !!signbit(x) != (int)(h >> 15);
    }
    EXPECT(bad == 0, "%d fp16 values widen wrongly", bad);
    EXPECT(st_bf16_to_f32(0x3f80) == 1.0f && st_bf16_to_f32(0xc040) == -3.0f && st_bf16_to_f32(0x0001) > 0,
           "bf16 widening");
}

static void test_read(void)
{
    /* a: F32 [2, 2]; b: BF16 [3]; c: F16 [2]; d: I64 [1]; the data in
     * another order than the header, as writers may lay it out */
    const float a[4] = {1.5f, -2.0f, 3.25f, 1e-30f};
    const uint16_t bv[3] = {0x3f80, 0xc040, 0x4049}, cv[2] = {0x3c00, 0x0001};
    const int64_t dv = 7;
    uint8_t data[16 + 6 + 4 + 8];
    memcpy(data, &dv, 8);
    memcpy(data + 8, a, 16);
    memcpy(data + 24, bv, 6);
    memcpy(data + 30, cv, 4);
    size_t n;
    uint8_t *b = build("{\"__metadata__\": {\"format\": \"pt\"}, "
                       "\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [8, 24]}, "
                       "\"b\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [24, 30]}, "
                       "\"c\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [30, 34]}, "
                       "\"d\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}, "
                       "\"e\": {\"dtype\": \"F32\", \"shape\": [0, 5], \"data_offsets\": [34, 34]}}",
                       data, sizeof data, &n);
    char path[256];
    snprintf(path, sizeof path, "%s/test_st_%ld.safetensors", getenv("FB_BUILDDIR") ? getenv("FB_BUILDDIR") : ".",
             (long)getpid());
    FILE *fp = fopen(path, "wb");
    EXPECT(fp && fwrite(b, 1, n, fp) == n && fclose(fp) == 0, "write %s", path);
    st_file_t f;
    char why[512] = "";
    int code = st_open(&f, path, why, sizeof why);
    EXPECT(code == 0 && f.n == 5, "open: %d %s", code, why);
    if (code)
        return;
    const st_tensor_t *ta = st_find(&f, "a"), *tb = st_find(&f, "b"), *tc = st_find(&f, "c"), *td = st_find(&f, "d");
    EXPECT(ta && tb && tc && td && !st_find(&f, "__metadata__") && !st_find(&f, "z"), "find");
    EXPECT(ta->ndim == 2 && ta->shape[0] == 2 && ta->shape[1] == 2 && ta->numel == 4 && ta->dtype == ST_F32,
           "a's entry");
    EXPECT(st_find(&f, "e")->numel == 0, "an empty tensor");
    float out[4] = {0};
    EXPECT(st_read_f32(&f, ta, 0, 4, out, why, sizeof why) == 0 && !memcmp(out, a, 16), "a read whole");
    EXPECT(st_read_f32(&f, ta, 1, 3, out, why, sizeof why) == 0 && out[0] == -2.0f && out[1] == 3.25f,
           "a elements [1, 3)");
    EXPECT(st_read_f32(&f, tb, 0, 3, out, why, sizeof why) == 0 && out[0] == 1.0f && out[1] == -3.0f &&
               out[2] == 3.140625f,
           "b (bf16) widened: %g %g %g", out[0], out[1], out[2]);
    EXPECT(st_read_f32(&f, tb, 2, 3, out, why, sizeof why) == 0 && out[0] == 3.140625f, "b element 2");
    EXPECT(st_read_f32(&f, tc, 0, 2, out, why, sizeof why) == 0 && out[0] == 1.0f && out[1] == ldexpf(1.0f, -24),
           "c (fp16) widened, a subnormal too");
    code = st_read_f32(&f, td, 0, 1, out, why, sizeof why);
    EXPECT(code == FB_EXIT_DATA && strstr(why, "\"d\" is I64"), "I64 is not read as a weight: %d %s", code, why);
    st_close(&f);
    unlink(path);
    code = st_open(&f, path, why, sizeof why);
    EXPECT(code == FB_EXIT_IO && strstr(why, path), "a missing file: %d %s", code, why);
    st_close(&f);

    /* the same bytes cut short: the last tensor's end is past the file */
    refused("truncated data", b, n - 3, n - 3, "truncated: tensor \"c\" ends at byte");
    refused("cut inside the header", b, 40, 40, "truncated");
    refused("shorter than 8 bytes", b, 5, 5, "truncated");
}

static void test_malformed(void)
{
    refused_header("not JSON", "{\"a\": ", 0, "not JSON");
    refused_header("duplicate key", "{\"a\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}, "
                                    "\"a\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}",
                   4, "not JSON");
    refused_header("an array", "[1, 2, 3]", 0, "not a JSON object");
    refused_header("no dtype", "{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "needs \"dtype\"");
    refused_header("entry not an object", "{\"a\": 3}", 0, "\"a\" is not an object");
    refused_header("unknown dtype", "{\"a\": {\"dtype\": \"Q7\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                   "unknown dtype \"Q7\"");
    refused_header("an extra key", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}",
                   4, "keys other than");
    refused_header("byte length vs dtype",
                   "{\"a\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [0, 12]}}", 12,
                   "hold 12 bytes, but 3 elements of F16 take 6");
    refused_header("offsets past the file", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
                   8, "truncated: tensor \"a\" ends at byte");
    refused_header("end before begin", "{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 8,
                   "0 <= begin <= end");
    refused_header("negative offset", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 8,
                   "0 <= begin <= end");
    refused_header("overlap",
                   "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                   "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                   12, "overlap");
    refused_header("negative shape", "{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4,
                   "shape[0] is not a non-negative integer");
    refused_header("shape not integers", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}",
                   4, "shape[0]");
    refused_header("a shape past 2^64",
                   "{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 16], \"data_offsets\": [0, 0]}}",
                   0, "larger than the file");
    /* 2^62 elements of 4 bytes wrap to 0 bytes in 64 bits: they once
     * matched data_offsets [0, 0] and the tensor was taken at 2^62 elements */
    refused_header("elements x dtype size past 2^64",
                   "{\"a\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 0]}}", 0,
                   "larger than the file");
    refused_header("the same after a dimension of 1",
                   "{\"a\": {\"dtype\": \"F32\", \"shape\": [1, 4611686018427387904], \"data_offsets\": [0, 0]}}",
                   0, "larger than the file");
    refused_header("metadata not an object", "{\"__metadata__\": [1]}", 0, "\"__metadata__\" is not an object");
    /* a header length beyond the file */
    uint8_t b[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    refused("header length past the end", b, 10, 10, "beyond the file");
}

/* A FIFO or a directory in the file's place: refused at once, never
 * opened for a read that would wait for a writer (the alarm turns a hang
 * into a failure). */
static void test_not_regular(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/test_st_fifo_%ld.safetensors",
             getenv("FB_BUILDDIR") ? getenv("FB_BUILDDIR") : ".", (long)getpid());
    unlink(path);
    EXPECT(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    alarm(20);
    st_file_t f;
    char why[512] = "";
    int code = st_open(&f, path, why, sizeof why);
    EXPECT(code == FB_EXIT_DATA && strstr(why, "not a regular file (a FIFO)") && strstr(why, path),
           "a FIFO: code %d, \"%s\"", code, why);
    st_close(&f);
    unlink(path);
    EXPECT(mkdir(path, 0700) == 0, "mkdir %s", path);
    code = st_open(&f, path, why, sizeof why);
    EXPECT(code == FB_EXIT_DATA && strstr(why, "not a regular file (a directory)"), "a directory: code %d, \"%s\"",
           code, why);
    st_close(&f);
    rmdir(path);
    alarm(0);
}

int main(void)
{
    test_widen();
    test_read();
    test_malformed();
    test_not_regular();
    testlib_scratch_free_all();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
