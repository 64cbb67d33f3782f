/* A checkpoint's parameters alone into a model_t (`fabula generate
 * --checkpoint`, `fabula eval`): no ZeRO engine, so no optimizer moments
 * and no gradients are allocated to hold what the file stores beside the
 * weights. The tensors are stored whole whatever layout wrote them
 * (docs/checkpoint.md), so any layout reads into any model. */
#ifndef FABULA_CKPT_CKPT_WEIGHTS_H
#define FABULA_CKPT_CKPT_WEIGHTS_H

#include "model/model.h"

/* Serial (no MPI; every rank of a job may call it on its own model): sets
 * every parameter view of m's table (an expert-parallel rank's experts, a
 * tensor-parallel slice, a pipeline stage's layers alike) from `path`,
 * each tensor's checksum checked. Ends the process naming the file and the
 * tensor: FB_EXIT_IO when the file cannot be read, FB_EXIT_DATA when it is
 * not a checkpoint, is damaged, or holds another model (a tensor missing,
 * of another shape, or one m's whole model does not have). A job of several
 * ranks runs it under fb_catch to agree on the outcome. */
void ckpt_read_weights(const char *path, model_t *m);

#endif
