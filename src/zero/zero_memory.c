/* The ZeRO engine's memory as arithmetic (zero_memory.h): what group_init
 * and group_alloc in zero.c allocate, which zero_memory checks against the
 * engine it reports on. */
#include <string.h>

#include "zero/zero_impl.h"
#include "zero/zero_memory.h"

void zero_group_shape_of(const param_table_t *t, int group, zero_group_shape_t *shape)
{
    memset(shape, 0, sizeof *shape);
    shape->numel = t->numel[group];
    for (int b = 0; b < t->nblocks; b++) {
        size_t lo, hi;
        param_table_block_range(t, b, group, &lo, &hi);
        if (hi - lo > shape->max_block)
            shape->max_block = hi - lo;
        if (b == 0)
            shape->block0 = hi - lo;
    }
}

size_t zero_owned(size_t numel, int size, int rank)
{
    const size_t shard = (numel + (size_t)size - 1) / (size_t)size;
    size_t lo = (size_t)rank * shard, hi = lo + shard;
    if (lo > numel)
        lo = numel;
    if (hi > numel)
        hi = numel;
    return hi - lo;
}

zero_memory_t zero_memory_of(const config_t *cfg, const zero_group_shape_t shape[PARAM_NGROUPS],
                             const int size[PARAM_NGROUPS], const int rank[PARAM_NGROUPS])
{
    const int stage = cfg->zero.stage;
    const int offload_opt = cfg->zero.offload_optimizer;
    const int offload_param = cfg->zero.offload_param && stage == 3;
    const int tied = cfg->model.tie_word_embeddings;
    const size_t f = sizeof(float);
    zero_memory_t m;
    memset(&m, 0, sizeof m);
    for (int gi = 0; gi < PARAM_NGROUPS; gi++) {
        const zero_group_shape_t *s = &shape[gi];
        /* stage 0 updates the whole buffer; 1-3 the shard */
        const size_t own = stage == 0 ? s->numel : zero_owned(s->numel, size[gi], rank[gi]);
        m.params += (stage == 3 ? own : s->numel) * f;
        if (offload_param)
            m.host_params += own * f;
        m.grads += (stage >= 2 ? own : s->numel) * f;
        m.optimizer += 2 * own * f;
        if (offload_opt) {
            m.host_optimizer += 2 * own * f;
            m.host_staging += 2 * own * f;
        }
        /* group_alloc: gradient slots (stage 2/3), the tied block's own slot,
         * gathered-parameter slots (stage 3) */
        if (stage >= 2 && s->max_block) {
            m.workspace += ZERO_GRAD_SLOTS * s->max_block * f;
            if (tied && s->block0)
                m.workspace += s->block0 * f;
        }
        if (stage == 3 && s->max_block)
            m.workspace += ZERO_PARAM_SLOTS * s->max_block * f;
    }
    return m;
}
