/* "parallel": the process layout (src/parallel/groups.h). Checked here so
 * that `fabula train --dry-run` reports a layout that cannot be built;
 * groups_create checks again when it builds the groups. */
#include "config/config_internal.h"

#define EP "parallel.expert_parallel_size"

void config_read_parallel(cj_ctx_t *c, config_t *cfg, int world_size)
{
    cj_section(c, "parallel");
    int ep = cj_int(c, EP, 1);
    int experts = cfg->model.num_local_experts;
    if (ep < 1) {
        cj_invalid(c, EP, "a positive integer");
        ep = 1;
    }
    if (experts <= 1 && ep > 1)
        cj_invalid(c, EP, "1 for a dense model (model.num_local_experts = %d: no experts to distribute)", experts);
    if (world_size % ep != 0)
        cj_invalid(c, EP, "a divisor of the world size (%d ranks)", world_size);
    if (experts > 1 && experts % ep != 0)
        cj_invalid(c, EP, "a divisor of model.num_local_experts = %d", experts);
    cfg->parallel.expert_parallel_size = ep;
    int chunks = cj_int(c, "parallel.moe_a2a_chunks", 1);
    if (chunks < 1 || chunks > 64)
        cj_invalid(c, "parallel.moe_a2a_chunks", "an integer from 1 to 64");
    cfg->parallel.moe_a2a_chunks = chunks;
    /* Tensor, pipeline and sequence parallelism are planned (`fabula plan
     * memory --layout`) but not trained yet (issue 17): a config asking for
     * them is refused by name rather than run as plain data parallelism. */
    if (cj_int(c, "parallel.tensor_parallel_size", 1) != 1)
        cj_invalid(c, "parallel.tensor_parallel_size", "1 (tensor parallelism is not implemented yet; `fabula plan "
                                                       "memory --layout dp=..,tp=..` predicts its memory)");
    if (cj_int(c, "parallel.pipeline_parallel_size", 1) != 1)
        cj_invalid(c, "parallel.pipeline_parallel_size", "1 (pipeline parallelism is not implemented yet; `fabula "
                                                         "plan memory --layout dp=..,pp=..` predicts its memory)");
    if (cj_bool(c, "parallel.sequence_parallel", 0))
        cj_invalid(c, "parallel.sequence_parallel", "false (sequence parallelism needs tensor parallelism, not "
                                                    "implemented yet; `fabula plan memory --layout ..,sp` predicts it)");
}
