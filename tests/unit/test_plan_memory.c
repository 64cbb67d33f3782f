/* src/plan layouts and memory: the spec parser and its errors, and the
 * tensor/pipeline-parallel state figures against parameter counts written
 * out here from the Hugging Face shapes of the default MoE model (vocab V,
 * hidden D, intermediate I, E experts, L layers, kv heads of head_dim D/H),
 * independently of the parameter table src/plan uses. */
#include <string.h>

#include "config/config.h"
#include "plan/plan.h"
#include "testlib.h"

static config_t cfg;

static void layout(const char *spec, plan_layout_t *lay)
{
    char err[256];
    int rc = plan_layout_parse(spec, &cfg, lay, err, sizeof err);
    EXPECT(rc == 0, "%s: %s", spec, err);
    rc = plan_layout_check(&cfg, lay, err, sizeof err);
    EXPECT(rc == 0, "%s: %s", spec, err);
}

/* elements of one layer on one of tp ranks (Megatron's split) */
static size_t layer_numel(int tp)
{
    const model_config_t *m = &cfg.model;
    const size_t D = (size_t)m->hidden_size, I = (size_t)m->intermediate_size, E = (size_t)m->num_local_experts;
    const size_t hd = D / (size_t)m->num_attention_heads, kv = (size_t)m->num_key_value_heads;
    const size_t kvrows = kv >= (size_t)tp ? hd * kv / (size_t)tp : hd;
    return 2 * D                      /* the two norms, replicated */
           + 2 * D * D / (size_t)tp   /* q, o */
           + 2 * kvrows * D           /* k, v */
           + E * D                    /* router, replicated */
           + E * 3 * I * D / (size_t)tp; /* w1, w3, w2 of each expert */
}

int main(void)
{
    config_load(&cfg, NULL, 0, NULL, 0, 64, 1);
    const model_config_t *m = &cfg.model;
    const size_t V = (size_t)m->vocab_size, D = (size_t)m->hidden_size, L = (size_t)m->num_hidden_layers;
    plan_layout_t lay;
    plan_memory_t mem;
    char err[256];

    /* parsing: world= stands for dp, defaults from the config */
    layout("world=8,tp=2", &lay);
    EXPECT(lay.dp == 4 && lay.tp == 2 && lay.pp == 1 && lay.world == 8, "dp %d world %d", lay.dp, lay.world);
    layout("dp=2,tp=2,pp=2,zero=1,offload=optimizer,recompute=full,accum=4,tokens=512", &lay);
    EXPECT(lay.world == 8 && lay.zero == 1 && lay.offload_optimizer && !lay.offload_param, "world %d", lay.world);
    EXPECT(lay.recompute == PLAN_RECOMPUTE_FULL && lay.grad_accum == 4 && lay.micro_batch_tokens == 512, "parts");
    const char *bad[] = {"dp=0", "zero=4", "tp=x", "offload=disk", "recompute=some", "xp=2", "sp=3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT(plan_layout_parse(bad[i], &cfg, &lay, err, sizeof err) != 0, "'%s' accepted", bad[i]);

    /* tp = 2, stage 0 over one dp rank: every weight, split or replicated */
    layout("dp=1,tp=2,zero=0", &lay);
    plan_memory(&cfg, &lay, &mem);
    size_t want = V * D / 2 + L * layer_numel(2) + D + V * D / 2;
    EXPECT(mem.params == 4 * want && mem.grads == 4 * want && mem.optimizer == 8 * want, "tp 2: params %zu, want %zu",
           mem.params, 4 * want);
    EXPECT(!mem.predicted, "tp 2 (train runs it) marked as a prediction");
    /* tp = 4 > kv heads (2): each rank one kv head's copy, as train builds
     * it (docs/parallel.md, "Replicated kv heads") */
    layout("dp=1,tp=4,zero=0", &lay);
    plan_memory(&cfg, &lay, &mem);
    want = V * D / 4 + L * layer_numel(4) + D + V * D / 4;
    EXPECT(mem.params == 4 * want, "tp 4: params %zu, want %zu", mem.params, 4 * want);
    EXPECT(!mem.predicted, "tp 4 above the kv heads (train replicates them) marked as a prediction");

    /* pp = 2 (one layer a stage): the embedding with layer 0, the final norm
     * and head with layer 1; the fuller stage reported */
    layout("dp=1,pp=2,zero=0,accum=8", &lay);
    plan_memory(&cfg, &lay, &mem);
    const size_t s0 = V * D + layer_numel(1), s1 = layer_numel(1) + D + V * D;
    EXPECT(mem.params == 4 * (mem.stage == 0 ? s0 : s1), "pp 2 stage %d: params %zu", mem.stage, mem.params);
    /* ZeRO-2 over dp = 4 of the tp = 2 shard: ceil(Psi / 4) each */
    layout("dp=4,tp=2,zero=2", &lay);
    plan_memory(&cfg, &lay, &mem);
    const size_t dense = V * D / 2 + L * (layer_numel(2) - (size_t)m->num_local_experts * 3 *
                                              (size_t)m->intermediate_size * D / 2) + D + V * D / 2;
    const size_t experts = L * (size_t)m->num_local_experts * 3 * (size_t)m->intermediate_size * D / 2;
    EXPECT(mem.grads == 4 * ((dense + 3) / 4 + (experts + 3) / 4), "zero 2: grads %zu", mem.grads);

    /* 1F1B: the first stage holds min(pp, accum) micro-batches */
    layout("dp=1,pp=2,zero=0,accum=8", &lay);
    plan_memory_t a;
    plan_memory(&cfg, &lay, &a);
    layout("dp=1,pp=2,zero=0,accum=1", &lay);
    plan_memory_t b;
    plan_memory(&cfg, &lay, &b);
    EXPECT(b.inflight_microbatches == 1 && (a.stage != 0 || a.inflight_microbatches == 2), "in flight %zu / %zu",
           a.inflight_microbatches, b.inflight_microbatches);
    /* recomputation and sequence parallelism only ever lower the peak */
    plan_memory_t none, sel, full, sp;
    layout("dp=1,tp=2,recompute=none", &lay);
    plan_memory(&cfg, &lay, &none);
    layout("dp=1,tp=2,recompute=selective", &lay);
    plan_memory(&cfg, &lay, &sel);
    layout("dp=1,tp=2,recompute=full", &lay);
    plan_memory(&cfg, &lay, &full);
    layout("dp=1,tp=2,sp", &lay);
    plan_memory(&cfg, &lay, &sp);
    EXPECT(full.activations < sel.activations && sel.activations < none.activations, "%zu %zu %zu",
           full.activations, sel.activations, none.activations);
    EXPECT(sp.activations_peak < none.activations_peak, "sp %zu vs %zu", sp.activations_peak, none.activations_peak);
    /* a layout's recomputation with expert parallelism: full recomputation
     * shares one MoE layer's exchange buffers, in the arena and the ep
     * buffers alike (the activations were the difference of the two) */
    plan_memory_t epn, epf;
    layout("dp=2,ep=2,recompute=none", &lay);
    plan_memory(&cfg, &lay, &epn);
    layout("dp=2,ep=2,recompute=full", &lay);
    plan_memory(&cfg, &lay, &epf);
    EXPECT(epf.activations < epn.activations && epf.moe_buffers < epn.moe_buffers, "ep 2: full %zu / %zu, none %zu / %zu",
           epf.activations, epf.moe_buffers, epn.activations, epn.moe_buffers);

    config_free(&cfg);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
