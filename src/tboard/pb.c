#include "tboard/pb.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void pb_init(pb_buf_t *b) { memset(b, 0, sizeof *b); }

void pb_free(pb_buf_t *b)
{
    free(b->data);
    pb_init(b);
}

void pb_clear(pb_buf_t *b) { b->len = 0; }

static void reserve(pb_buf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    b->data = fb_realloc(b->data, cap);
    b->cap = cap;
}

static void put(pb_buf_t *b, const void *p, size_t n)
{
    reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

size_t pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t varint_encode(unsigned char *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

void pb_varint(pb_buf_t *b, uint64_t v)
{
    unsigned char tmp[10];
    put(b, tmp, varint_encode(tmp, v));
}

void pb_key(pb_buf_t *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

void pb_int64(pb_buf_t *b, int field, int64_t v)
{
    pb_key(b, field, PB_VARINT);
    pb_varint(b, (uint64_t)v);
}

/* The wire format is little-endian whatever the host. */
static void put_le(pb_buf_t *b, uint64_t bits, int nbytes)
{
    unsigned char tmp[8];
    for (int i = 0; i < nbytes; i++)
        tmp[i] = (unsigned char)(bits >> (8 * i));
    put(b, tmp, (size_t)nbytes);
}

void pb_double(pb_buf_t *b, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(b, field, PB_FIXED64);
    put_le(b, bits, 8);
}

void pb_float(pb_buf_t *b, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(b, field, PB_FIXED32);
    put_le(b, bits, 4);
}

void pb_bytes(pb_buf_t *b, int field, const void *data, size_t n)
{
    pb_key(b, field, PB_LEN);
    pb_varint(b, n);
    put(b, data, n);
}

void pb_string(pb_buf_t *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

void pb_doubles(pb_buf_t *b, int field, const double *v, size_t n)
{
    if (n == 0)
        return;
    pb_key(b, field, PB_LEN);
    pb_varint(b, 8 * n);
    reserve(b, 8 * n);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        put_le(b, bits, 8);
    }
}

size_t pb_begin(pb_buf_t *b) { return b->len; }

void pb_end(pb_buf_t *b, int field, size_t mark)
{
    FB_ASSERT(mark <= b->len);
    const size_t body = b->len - mark;
    unsigned char head[20];
    size_t h = varint_encode(head, ((uint64_t)field << 3) | PB_LEN);
    h += varint_encode(head + h, body);
    reserve(b, h);
    memmove(b->data + mark + h, b->data + mark, body);
    memcpy(b->data + mark, head, h);
    b->len += h;
}
