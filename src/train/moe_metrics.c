#include "train/moe_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "util/error.h"

/* the counts are long; the world sums take long long */
_Static_assert(sizeof(long) == sizeof(long long), "long must be 64 bits");

void moe_metrics_init(moe_metrics_t *mm, const model_config_t *mc, int ntags, int ep_size)
{
    memset(mm, 0, sizeof *mm);
    mm->ep_size = ep_size;
    if (!config_model_is_moe(mc))
        return;
    mm->L = mc->num_hidden_layers;
    mm->E = mc->num_local_experts;
    mm->ntags = ntags;
    mm->expert_tokens = fb_calloc((size_t)mm->L * mm->E, sizeof *mm->expert_tokens);
    mm->dropped = fb_calloc((size_t)mm->L, sizeof *mm->dropped);
    mm->aux = fb_calloc((size_t)mm->L, sizeof *mm->aux);
    mm->z = fb_calloc((size_t)mm->L, sizeof *mm->z);
    mm->tag_tokens = fb_calloc((size_t)(ntags > 0 ? ntags : 1) * mm->L * mm->E, sizeof *mm->tag_tokens);
    mm->kept_share = fb_calloc(3 * (size_t)mm->L, sizeof *mm->kept_share);
}

void moe_metrics_free(moe_metrics_t *mm)
{
    free(mm->expert_tokens);
    free(mm->dropped);
    free(mm->aux);
    free(mm->z);
    free(mm->tag_tokens);
    free(mm->kept_share);
    memset(mm, 0, sizeof *mm);
}

void moe_metrics_begin_step(moe_metrics_t *mm, comm_t *ep)
{
    if (ep)
        comm_stats_reset(ep);
    if (mm->E == 0)
        return;
    memset(mm->expert_tokens, 0, (size_t)mm->L * mm->E * sizeof *mm->expert_tokens);
    memset(mm->dropped, 0, (size_t)mm->L * sizeof *mm->dropped);
    memset(mm->aux, 0, (size_t)mm->L * sizeof *mm->aux);
    memset(mm->z, 0, (size_t)mm->L * sizeof *mm->z);
    memset(mm->tag_tokens, 0, (size_t)mm->ntags * mm->L * mm->E * sizeof *mm->tag_tokens);
    memset(mm->kept_share, 0, 3 * (size_t)mm->L * sizeof *mm->kept_share);
}

void moe_metrics_add(moe_metrics_t *mm, const model_stats_t *st, double mb_weight)
{
    if (mm->E == 0)
        return;
    /* an empty micro-batch's counts are zeros (model_forward) */
    for (size_t i = 0; i < (size_t)mm->L * mm->E; i++)
        mm->expert_tokens[i] += st->tokens_per_expert[i];
    for (int l = 0; l < mm->L; l++) {
        mm->dropped[l] += st->dropped_per_layer[l];
        mm->aux[l] += st->aux_per_layer[l] * mb_weight;
        mm->z[l] += st->z_per_layer[l] * mb_weight;
        /* a layer of another pipeline stage, a dense layer or an empty
         * micro-batch has no assignment here: not a micro-batch of the
         * layer's spread */
        long kept = 0;
        for (int e = 0; e < mm->E; e++)
            kept += st->tokens_per_expert[(size_t)l * mm->E + e];
        const long assigned = kept + st->dropped_per_layer[l];
        if (assigned > 0) {
            const double share = (double)kept / (double)assigned;
            mm->kept_share[3 * l] += 1.0;
            mm->kept_share[3 * l + 1] += share;
            mm->kept_share[3 * l + 2] += share * share;
        }
    }
    if (st->tag_expert_tokens)
        for (size_t i = 0; i < (size_t)mm->ntags * mm->L * mm->E; i++)
            mm->tag_tokens[i] += st->tag_expert_tokens[i];
}

void moe_metrics_end_step(moe_metrics_t *mm, comm_t *ep, comm_t *dp)
{
    if (ep) {
        const comm_kind_t kinds[2] = {COMM_KIND_ALLTOALL, COMM_KIND_ALLTOALLV};
        mm->a2a_calls = 0;
        mm->a2a_bytes = mm->a2a_seconds = 0.0;
        for (int i = 0; i < 2; i++) {
            const comm_stats_t *s = comm_stats(ep, kinds[i]);
            mm->a2a_calls += (long)s->calls;
            mm->a2a_bytes += (double)s->bytes;
            mm->a2a_seconds += s->wait_seconds;
        }
    }
    if (mm->E == 0 || comm_size(dp) == 1)
        return;
    comm_allreduce(dp, mm->expert_tokens, (size_t)mm->L * mm->E, COMM_I64, COMM_SUM);
    comm_allreduce(dp, mm->dropped, (size_t)mm->L, COMM_I64, COMM_SUM);
    const size_t L = (size_t)mm->L;
    double *buf = fb_malloc(5 * L * sizeof *buf);
    memcpy(buf, mm->aux, L * sizeof *buf);
    memcpy(buf + L, mm->z, L * sizeof *buf);
    memcpy(buf + 2 * L, mm->kept_share, 3 * L * sizeof *buf);
    comm_allreduce(dp, buf, 5 * L, COMM_F64, COMM_SUM);
    memcpy(mm->aux, buf, L * sizeof *buf);
    memcpy(mm->z, buf + L, L * sizeof *buf);
    memcpy(mm->kept_share, buf + 2 * L, 3 * L * sizeof *buf);
    free(buf);
    if (mm->ntags > 0)
        comm_allreduce(dp, mm->tag_tokens, (size_t)mm->ntags * mm->L * mm->E, COMM_I64, COMM_SUM);
}
