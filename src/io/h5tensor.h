/* Small helpers for whole-dataset tensors and attributes in HDF5 files:
 * reference tensors for validation, and the simple parts of checkpoints.
 *
 * They work on any file id, opened serially or through MPI-IO. Reads use the
 * default (independent) transfer, so any rank may read on its own. In a file
 * opened with MPI-IO, creating datasets and attributes is collective: every
 * rank must call the writers with the same arguments. Sharded tensors that
 * ranks write by hyperslab do not go through these.
 *
 * Failures a user can cause (missing file, missing dataset, wrong size, wrong
 * type) end in fb_fatal naming the file and the dataset; any other failed
 * HDF5 call goes through CHECK_H5.
 */
#ifndef FABULA_IO_H5TENSOR_H
#define FABULA_IO_H5TENSOR_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#define H5_MAX_RANK 8

/* Opens an existing file read-only (FB_EXIT_IO naming the path if it is
 * unreadable or not HDF5). */
hid_t h5_open_read(const char *path);

/* Creates (truncates) a file for writing. */
hid_t h5_create(const char *path);

/* Closes a file returned by h5_open_read or h5_create. */
void h5_close(hid_t file);

/* 1 when every component of `path` (e.g. "/model/layers/0/w") exists and
 * each one but the last is a group; 0 otherwise. */
int h5_exists(hid_t file, const char *path);
/* The same for a file that may be damaged: 1 or 0 as h5_exists, -1 (with
 * HDF5's error stack silenced) when the metadata on the way cannot be read.
 * h5_exists ends the run (FB_EXIT_DATA) where this returns -1. */
int h5_lookup(hid_t file, const char *path);

/* Number of elements of a dataset (1 for a scalar); when not NULL, *ndim and
 * dims[0..ndim) receive its shape. A missing dataset or one of rank > 8 is
 * FB_EXIT_DATA. */
size_t h5_dataset_numel(hid_t file, const char *path, int *ndim, long long dims[H5_MAX_RANK]);

/* A compressed dataset may declare up to this many bytes of elements per
 * byte it stores (DEFLATE's largest ratio is about 1032:1). */
#define H5_MAX_EXPANSION 1100

/* h5_dataset_numel for a dataset about to be read whole into memory: its
 * extent must be backed by what the file stores (elements x their stored
 * size <= the bytes allocated to it, H5_MAX_EXPANSION times that when it
 * has filters). Chunks never written read as fill values, so an extent of
 * 10^9 in a file of kilobytes would otherwise cost 10^9 elements of memory
 * for nothing: FB_EXIT_DATA naming the file, the dataset and both sizes. */
size_t h5_dataset_numel_stored(hid_t file, const char *path);

/* The rule of h5_dataset_numel_stored for an open dataset of `numel`
 * elements, without ending the run: 1 backed, 0 not, -1 when its type or
 * layout cannot be read (HDF5's error stack is the caller's to silence). */
int h5_dataset_backs(hid_t ds, size_t numel);

/* Read a whole numeric dataset of exactly `n` elements, converting from the
 * stored type (FB_EXIT_DATA on a missing dataset, a non-numeric one, or
 * "FILE: dataset PATH has N elements, expected M"). */
void h5_read_f32(hid_t file, const char *path, float *out, size_t n);
void h5_read_f64(hid_t file, const char *path, double *out, size_t n);
void h5_read_i32(hid_t file, const char *path, int *out, size_t n);
void h5_read_i64(hid_t file, const char *path, long long *out, size_t n);

/* A dataset holding exactly one number. */
double h5_read_scalar_f64(hid_t file, const char *path);

/* A string attribute of `obj` (file, group or dataset), variable- or
 * fixed-length (h5py writes variable-length UTF-8). Caller frees. */
char *h5_read_attr_string(hid_t obj, const char *name);

/* An integer attribute holding one value. */
long long h5_read_attr_i64(hid_t obj, const char *name);

/* Create a dataset at `path` (missing parent groups are created) with the
 * given shape (ndim 0: a scalar) and write all of it. Stored little-endian
 * IEEE / two's complement whatever the host. */
void h5_write_f32(hid_t file, const char *path, const float *data, int ndim, const long long *dims);
void h5_write_f64(hid_t file, const char *path, const double *data, int ndim, const long long *dims);
void h5_write_i32(hid_t file, const char *path, const int *data, int ndim, const long long *dims);
void h5_write_i64(hid_t file, const char *path, const long long *data, int ndim, const long long *dims);

/* Set (or replace) an attribute on `obj`. Strings are stored fixed-length
 * UTF-8, null-padded (numpy's "S" layout): no global-heap storage, which
 * keeps collective writes in parallel HDF5 simple. */
void h5_write_attr_string(hid_t obj, const char *name, const char *value);
void h5_write_attr_i64(hid_t obj, const char *name, long long value);
void h5_write_attr_u64(hid_t obj, const char *name, uint64_t value);
void h5_write_attr_f64(hid_t obj, const char *name, double value);
/* A 1-D vector of n values (a vector even when n is 1). */
void h5_write_attr_i64s(hid_t obj, const char *name, const long long *values, size_t n);

#endif
