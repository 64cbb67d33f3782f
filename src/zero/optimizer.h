/* AdamW over the model's flat parameter groups, the global gradient norm
 * and clipping. Moments have the parameters' layout. */
#ifndef FABULA_TRAIN_OPTIMIZER_H
#define FABULA_TRAIN_OPTIMIZER_H

#include "config/config.h"
#include "model/model.h"

typedef struct optimizer {
    const ops_t *ops;
    optim_config_t cfg;
    float *m[PARAM_NGROUPS], *v[PARAM_NGROUPS];
    size_t numel[PARAM_NGROUPS];
    long step;          /* updates applied so far */
} optimizer_t;

void optimizer_init(optimizer_t *opt, const optim_config_t *cfg, model_t *model);
void optimizer_free(optimizer_t *opt);

/* sqrt of the sum of squares of every gradient element (all groups). */
double grads_global_norm(model_t *model);
/* Scales gradients by max_norm / (norm + 1e-6) when that is below 1 (the
 * rule of torch.nn.utils.clip_grad_norm_ and DeepSpeed). Returns the factor. */
double grads_clip(model_t *model, double norm, double max_norm);

/* One update with learning rate lr. */
void optimizer_step(optimizer_t *opt, model_t *model, double lr);

#endif
