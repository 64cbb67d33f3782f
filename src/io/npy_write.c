/* io/npy_write.h. The header: the magic "\x93NUMPY", version 1.0, a
 * little-endian uint16 length, then a Python dict literal padded with
 * spaces and ended by '\n' so that the data starts at a multiple of 64
 * bytes (numpy's own writer aligns so). */
#include "io/npy_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "util/error.h"

void npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape)
{
    FB_ASSERT(ndim >= 1 && ndim <= 4);
    char dict[256];
    int k = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)shape[d], d + 1 < ndim ? " " : "");
        numel *= (size_t)shape[d];
    }
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    size_t header = 10 + (size_t)k + 1;
    size_t padded = (header + 63) / 64 * 64;
    size_t total = padded + numel * sizeof(float);
    unsigned char *buf = fb_malloc(total);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    const size_t hlen = padded - 10;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)k);
    memset(buf + 10 + k, ' ', padded - 10 - (size_t)k - 1);
    buf[padded - 1] = '\n';
    /* fp32 in memory is little-endian on every machine fabula builds on */
    memcpy(buf + padded, data, numel * sizeof(float));
    atomic_write_file(path, buf, total);
    free(buf);
}
