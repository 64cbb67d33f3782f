/* One fp32 array as a NumPy .npy file (format 1.0, little-endian '<f4',
 * C order), what numpy.load reads: `fabula eval --logits-out`. */
#ifndef FABULA_IO_NPY_WRITE_H
#define FABULA_IO_NPY_WRITE_H

#include <stddef.h>
#include <stdint.h>

/* shape[ndim] (ndim 1..4); written whole through atomic_write_file, so an
 * I/O error exits FB_EXIT_IO naming the path. */
void npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);

#endif
