/* The few protobuf wire-format writes an event file needs: varints, fixed
 * 64- and 32-bit fields, length-delimited strings and nested messages,
 * packed repeated doubles. Written by hand rather than through protobuf-c:
 * Event, Summary, SessionLog and HistogramProto use six field kinds in all,
 * protobuf-c would add a build dependency, a code generator and generated
 * files to keep in step with TensorBoard's .proto, for some 150 lines. */
#ifndef FABULA_TBOARD_PB_H
#define FABULA_TBOARD_PB_H

#include <stddef.h>
#include <stdint.h>

typedef struct pb_buf {
    unsigned char *data;
    size_t len, cap;
} pb_buf_t;

void pb_init(pb_buf_t *b);
void pb_free(pb_buf_t *b);
void pb_clear(pb_buf_t *b);

/* Base-128 little-endian varint (at most 10 bytes). */
void pb_varint(pb_buf_t *b, uint64_t v);
/* Field keys: (field << 3) | wire type. */
enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };
void pb_key(pb_buf_t *b, int field, int wire);

void pb_int64(pb_buf_t *b, int field, int64_t v);  /* int64 and enums: two's complement varint */
void pb_double(pb_buf_t *b, int field, double v);
void pb_float(pb_buf_t *b, int field, float v);
void pb_bytes(pb_buf_t *b, int field, const void *data, size_t n);
void pb_string(pb_buf_t *b, int field, const char *s);
/* A packed repeated double field (omitted when n is 0, as proto3 does). */
void pb_doubles(pb_buf_t *b, int field, const double *v, size_t n);

/* A nested message: pb_begin returns a mark, the message's fields follow,
 * pb_end puts the key and length in front of them. */
size_t pb_begin(pb_buf_t *b);
void pb_end(pb_buf_t *b, int field, size_t mark);

/* The number of bytes pb_varint(v) writes. */
size_t pb_varint_size(uint64_t v);

#endif
