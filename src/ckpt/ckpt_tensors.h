/* Serial, tensor-by-tensor reading of a checkpoint's parameters (one
 * process, HDF5's default driver, no MPI): for `fabula export`, which
 * needs each whole tensor once and never the whole model in memory.
 * Checkpoints store every tensor whole under its Hugging Face name
 * whatever the ZeRO/ep layout that wrote them (docs/checkpoint.md), so
 * this sees the same tensors for every layout. */
#ifndef FABULA_CKPT_CKPT_TENSORS_H
#define FABULA_CKPT_CKPT_TENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt_tensors ckpt_tensors_t;

/* Opens `path` and lists its /params tensors, sorted by name (strcmp).
 * Ends the process: FB_EXIT_IO when the file cannot be read, FB_EXIT_DATA
 * naming the file when it is not a checkpoint this fabula reads, or damaged
 * (metadata, tensor table, a shape). */
ckpt_tensors_t *ckpt_tensors_open(const char *path);
void ckpt_tensors_close(ckpt_tensors_t *c);

/* The effective config JSON saved in the checkpoint, and its step. */
const char *ckpt_tensors_config(const ckpt_tensors_t *c);
long long ckpt_tensors_step(const ckpt_tensors_t *c);

size_t ckpt_tensors_count(const ckpt_tensors_t *c);
const char *ckpt_tensors_name(const ckpt_tensors_t *c, size_t i);
/* ndim (1 or 2) and dims[0..ndim) of tensor i. */
int ckpt_tensors_shape(const ckpt_tensors_t *c, size_t i, uint64_t dims[2]);
size_t ckpt_tensors_numel(const ckpt_tensors_t *c, size_t i);
/* Index of `name`, or -1. */
long ckpt_tensors_find(const ckpt_tensors_t *c, const char *name);

/* Reads tensor i (numel floats) into out and checks its stored checksum:
 * a mismatch or an unreadable dataset ends the process with FB_EXIT_DATA
 * naming the file and the tensor. */
void ckpt_tensors_read(const ckpt_tensors_t *c, size_t i, float *out);

#endif
