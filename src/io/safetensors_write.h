/* Writing safetensors files (https://huggingface.co/docs/safetensors), the
 * format transformers loads weights from. Debian packages no maintained C
 * library for it, and the format is small: an 8-byte little-endian header
 * length N, N bytes of JSON (padded with spaces to a multiple of 8), then
 * the tensors' raw little-endian bytes back to back in the header's order.
 *
 * The JSON is compact, "__metadata__" ({"format":"pt"}) first, then one
 * entry per tensor {"dtype","shape","data_offsets":[begin,end]} with offsets
 * relative to the end of the header: the layout the safetensors package
 * itself writes. The caller gives the tensors in the order it wants them in
 * the file (fabula: sorted by name, as safetensors does for one dtype) and
 * then streams their bytes in that order, one tensor or less at a time. */
#ifndef FABULA_IO_SAFETENSORS_WRITE_H
#define FABULA_IO_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 4

typedef struct st_tensor {
    const char *name;          /* any UTF-8 text; JSON-escaped in the header */
    const char *dtype;         /* "F32", "BF16", "F16", ... */
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;           /* numel * element size */
} st_tensor_t;

/* The header for tensors t[0..n), 8-byte length prefix included (a new
 * buffer, total length in *len). */
uint8_t *safetensors_header(const st_tensor_t *t, size_t n, size_t *len);

typedef struct st_writer st_writer_t;

/* Creates (truncates) `path` and writes the header. I/O errors end the
 * process with FB_EXIT_IO naming the path. */
st_writer_t *safetensors_create(const char *path, const st_tensor_t *t, size_t n);
/* Appends the next `nbytes` of tensor data (calls may split or join
 * tensors; the total must come out right). */
void safetensors_append(st_writer_t *w, const void *data, size_t nbytes);
/* Checks that every tensor's bytes came, fsyncs and closes. Returns the
 * file's size. */
uint64_t safetensors_finish(st_writer_t *w);

#endif
