/* Reading the safetensors format (Hugging Face): an 8-byte little-endian
 * header length N, N bytes of JSON {name: {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {...}}, then the tensors'
 * bytes, offsets relative to the end of the header. The header is validated
 * whole when the file is opened (offsets inside the file, no two tensors
 * overlapping, byte length = elements x dtype size), so a later read of any
 * element range cannot go astray; reads are pread()s of just that range. */
#ifndef FABULA_IO_SAFETENSORS_READ_H
#define FABULA_IO_SAFETENSORS_READ_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

/* The dtypes fabula widens to fp32 exactly; the others are parsed (a file
 * may hold them) but cannot be read as weights. */
typedef enum { ST_F32 = 0, ST_BF16, ST_F16, ST_OTHER } st_dtype_t;

typedef struct st_tensor {
    char *name;
    st_dtype_t dtype;
    char dtype_name[16];  /* as the header spells it ("F32", "I64", ...) */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;  /* absolute byte offsets in the file */
} st_tensor_t;

typedef struct st_file {
    char *path;
    int fd;               /* -1 for a header parsed from memory */
    uint64_t size;        /* bytes of the file */
    st_tensor_t *t;       /* sorted by name */
    int n;
} st_file_t;

/* Parses a header from its first `n` bytes (the 8-byte length and the JSON;
 * more is fine) of a file of `file_size` bytes named `path` (for messages).
 * Returns 0, or FB_EXIT_DATA with why[cap] naming the file and the problem
 * (a truncated file says so). f->fd is -1. */
int st_parse(st_file_t *f, const char *path, const uint8_t *bytes, size_t n, uint64_t file_size, char *why,
             size_t cap);
/* Opens and parses `path`: 0, FB_EXIT_IO (cannot read) or FB_EXIT_DATA. */
int st_open(st_file_t *f, const char *path, char *why, size_t cap);
void st_close(st_file_t *f);

/* NULL if the file has no tensor `name`. */
const st_tensor_t *st_find(const st_file_t *f, const char *name);

/* Elements [lo, hi) of t (row-major) widened to fp32 into out[hi - lo].
 * Returns 0, FB_EXIT_DATA (a dtype fabula does not read) or FB_EXIT_IO. */
int st_read_f32(const st_file_t *f, const st_tensor_t *t, uint64_t lo, uint64_t hi, float *out, char *why,
                size_t cap);

/* Widening of one 16-bit value (exact). */
float st_bf16_to_f32(uint16_t h);
float st_f16_to_f32(uint16_t h);

#endif
