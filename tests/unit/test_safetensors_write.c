/* src/io/safetensors_write: the header against byte strings written out by
 * hand from the format's description (8-byte little-endian length, compact
 * JSON with "__metadata__" first, spaces to a multiple of 8), and a whole
 * file (header, then the data in order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors_write.h"
#include "testlib.h"

/* 143 bytes of JSON, one space of padding: length 144 = 0x90 */
static const char JSON_TWO[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"bw\":{\"dtype\":\"BF16\",\"shape\":[1,3],\"data_offsets\":[8,14]}} ";

static int header_is(const st_tensor_t *t, size_t n, const uint8_t prefix[8], const char *json)
{
    size_t len;
    uint8_t *h = safetensors_header(t, n, &len);
    int ok = len == 8 + strlen(json) && memcmp(h, prefix, 8) == 0 && memcmp(h + 8, json, strlen(json)) == 0;
    if (!ok)
        printf("got %zu bytes: %.*s\n", len, (int)(len > 8 ? len - 8 : 0), (const char *)h + 8);
    free(h);
    return ok;
}

int main(void)
{
    const st_tensor_t two[2] = {{"a", "F32", 1, {2}, 8}, {"bw", "BF16", 2, {1, 3}, 6}};
    const uint8_t len144[8] = {0x90, 0, 0, 0, 0, 0, 0, 0};
    EXPECT(header_is(two, 2, len144, JSON_TWO), "two tensors, padded");

    /* 32 bytes: no padding */
    const uint8_t len32[8] = {0x20, 0, 0, 0, 0, 0, 0, 0};
    EXPECT(header_is(NULL, 0, len32, "{\"__metadata__\":{\"format\":\"pt\"}}"), "no tensors");

    /* a quote, a backslash and a control character in a name are escaped;
     * a scalar has shape []. 80 bytes of JSON, padded to 80 (none) */
    const st_tensor_t odd[1] = {{"q\"\\\n", "F16", 0, {0}, 2}};
    const char *json_odd = "{\"__metadata__\":{\"format\":\"pt\"},\"q\\\"\\\\\\u000a\":{\"dtype\":\"F16\",\"shape\":[],"
                           "\"data_offsets\":[0,2]}}";
    char padded[128];
    size_t jl = strlen(json_odd);
    memcpy(padded, json_odd, jl);
    while (jl % 8)
        padded[jl++] = ' ';
    padded[jl] = '\0';
    const uint8_t lenodd[8] = {(uint8_t)jl, 0, 0, 0, 0, 0, 0, 0};
    EXPECT(header_is(odd, 1, lenodd, padded), "escaped name, scalar");

    /* a file: the header, then the bytes as appended, split across calls */
    char path[512];
    snprintf(path, sizeof path, "%s/test_st_%ld.safetensors", getenv("FB_BUILDDIR") ? getenv("FB_BUILDDIR") : ".",
             (long)getpid());
    st_writer_t *w = safetensors_create(path, two, 2);
    const uint8_t data[14] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    safetensors_append(w, data, 5);
    safetensors_append(w, data + 5, 9);
    uint64_t size = safetensors_finish(w);
    EXPECT(size == 8 + 144 + 14, "file size");
    FILE *f = fopen(path, "rb");
    uint8_t buf[256];
    size_t got = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    EXPECT(got == size && memcmp(buf, len144, 8) == 0 && memcmp(buf + 8, JSON_TWO, 144) == 0 &&
                               memcmp(buf + 152, data, 14) == 0, "file content");
    unlink(path);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
