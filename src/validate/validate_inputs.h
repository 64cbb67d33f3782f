/* What the float64 PyTorch reference (validation/check_curve.py) needs to
 * recompute the first steps of a reference job on its own: the job's
 * initial weights (fabula's initialisation from run.seed), the packed
 * micro-batches of each step (the sampler's and packer's choice, which do
 * not depend on the layout) and the lr of each update. The losses,
 * gradients and AdamW updates are then the reference's. */
#ifndef FABULA_VALIDATE_INPUTS_H
#define FABULA_VALIDATE_INPUTS_H

#include "config/config.h"

/* Writes `path` (HDF5): /weights/<HF name> float32; root attributes
 * config_json (cfg's effective config) and steps; /steps/<s>/lr (float64
 * scalar) and /steps/<s>/<m>/{tokens,positions,targets,cu_seqlens} (int32)
 * for step s (1-based) and its micro-batch m. A world of one rank (the
 * model and data are opened as that rank's). */
void validate_write_inputs(const config_t *cfg, const char *path, long steps);

#endif
