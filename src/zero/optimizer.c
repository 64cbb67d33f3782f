#include "zero/optimizer.h"

#include <math.h>
#include <string.h>

void optimizer_init(optimizer_t *opt, const optim_config_t *cfg, model_t *model)
{
    memset(opt, 0, sizeof *opt);
    opt->cfg = *cfg;
    opt->ops = model_ops(model);
    const param_table_t *t = model_params_table(model);
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        opt->numel[g] = t->numel[g];
        opt->m[g] = opt->ops->alloc(t->numel[g] * sizeof(float));
        opt->v[g] = opt->ops->alloc(t->numel[g] * sizeof(float));
    }
}

void optimizer_free(optimizer_t *opt)
{
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (opt->m[g])
            opt->ops->release(opt->m[g]);
        if (opt->v[g])
            opt->ops->release(opt->v[g]);
    }
    memset(opt, 0, sizeof *opt);
}

double grads_global_norm(model_t *model)
{
    const ops_t *o = model_ops(model);
    const param_table_t *t = model_params_table(model);
    double ss = 0.0;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        if (t->numel[g])
            ss += o->sumsq(model_grads(model, g), t->numel[g]);
    return sqrt(ss);
}

double grads_clip(model_t *model, double norm, double max_norm)
{
    if (max_norm <= 0.0)
        return 1.0;
    double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0)
        return 1.0;
    const ops_t *o = model_ops(model);
    const param_table_t *t = model_params_table(model);
    for (int g = 0; g < PARAM_NGROUPS; g++)
        if (t->numel[g])
            o->scale(model_grads(model, g), t->numel[g], (float)coef);
    return coef;
}

void optimizer_step(optimizer_t *opt, model_t *model, double lr)
{
    opt->step++;
    const optim_config_t *c = &opt->cfg;
    for (int g = 0; g < PARAM_NGROUPS; g++) {
        if (!opt->numel[g])
            continue;
        opt->ops->adamw(model_params(model, g), model_grads(model, g), opt->m[g], opt->v[g], opt->numel[g],
                        (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps, (float)c->weight_decay,
                        c->adam_w_mode, opt->step);
    }
}
