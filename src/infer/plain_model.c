/* infer/plain_model.h. A model made without its gradient buffer has no
 * default hooks (model_set_hooks(NULL) wants both buffers): these are the
 * default parameter hook, and a gradient hook that refuses. */
#include "infer/plain_model.h"

#include "util/error.h"

static void own_params(void *ctx, int block, int backward, float *base[PARAM_NGROUPS])
{
    (void)block, (void)backward;
    model_t *m = ctx;
    for (int g = 0; g < PARAM_NGROUPS; g++)
        base[g] = model_params(m, g);
}

static void no_grads(void *ctx, int block, float *base[PARAM_NGROUPS])
{
    (void)ctx, (void)base;
    fb_fatal(FB_EXIT_INTERNAL, "a backward pass (block %d) on a forward-only model: it has no gradient buffer",
             block);
}

model_t *plain_model_create(const model_config_t *mc, const ops_t *ops, int max_tokens, comm_t *ep)
{
    model_t *m = model_create_ep(mc, ops, max_tokens, MODEL_NO_GRAD_BUFFER, ep);
    const model_hooks_t hooks = {m, own_params, NULL, no_grads, NULL, 0};
    model_set_hooks(m, &hooks);
    return m;
}
