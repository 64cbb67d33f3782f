#include "validate/validate_jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/strbuf.h"

/* What every job shares: the default config's tiny MoE (2 layers, 4
 * experts top-2, capacity 1.25, load-balancing and z losses) made smaller
 * still (hidden 64, windows of 64 tokens, 8 of them per step) so that a
 * step takes milliseconds on one core; the batch triple is fixed by
 * train_batch_size and the micro-batch size, so that 1, 2 and 4 ranks train
 * on the same 4 micro-batches (4, 2 or 1 per data-parallel rank) and differ
 * only by rounding. One thread per rank (validate_run). */
static const char common_sets[] =
    "model.hidden_size=64 model.intermediate_size=128 data.train=inputs/sample.jsonl data.corpus= "
    "data.tokenizer=bytes data.seq_len=64 data.sampler=lpt data.packing=best_fit train_batch_size=8 "
    "train_micro_batch_size_per_gpu=2 run.seed=1234 run.resume=none run.eval_interval=0 "
    "checkpoint.save_interval=-1 steps_per_print=50 scheduler.type=WarmupDecayLR "
    "scheduler.params.warmup_min_lr=0 scheduler.params.warmup_max_lr=3e-3 scheduler.params.warmup_num_steps=20 "
    "zero_optimization.stage=0 parallel.expert_parallel_size=1";

#define EP_UP_TO_2 {"", "parallel.expert_parallel_size=2", "parallel.expert_parallel_size=2"}

const validate_job_def_t validate_jobs[] = {
    {"base", "base-v1",
     "the trainer's core: the default MoE (capacity, load-balancing and z losses) on the byte tokenizer, AdamW, "
     "WarmupDecayLR, clipping; data parallelism at ZeRO 0 over 300 steps",
     300, 40, "", {"", "", ""}, {NULL, NULL, NULL}, 0, 0, 0, "cpu", "fp32", 0, 1},
    {"corpus-zero3-ep", "corpus-zero3-ep-v1",
     "a BPE tokenizer and an HDF5 corpus made by fabula's own tokenizer and prep jobs; ZeRO 3 with expert "
     "parallelism; a checkpoint written on that layout at step 12 and resumed on another (ZeRO 1 or 2, "
     "another ep); the validation split's loss every 10 steps",
     100, 20, "model.vocab_size=512 run.eval_samples=8",
     {"zero_optimization.stage=3", "zero_optimization.stage=3 parallel.expert_parallel_size=2",
      "zero_optimization.stage=3 parallel.expert_parallel_size=2"},
     {"zero_optimization.stage=1", "zero_optimization.stage=2", "zero_optimization.stage=1 parallel.expert_parallel_size=4"},
     12, 10, 1, "cpu", "fp32", 0, 1},
    {"tp-pp", "tp-pp-v1",
     "tensor parallelism with sequence parallelism, pipeline parallelism (tp 2 x pp 2 on 4 ranks, tp 2 on 2), "
     "full activation recomputation",
     100, 15, "model.recompute=full",
     {"", "parallel.tensor_parallel_size=2 parallel.sequence_parallel=true",
      "parallel.tensor_parallel_size=2 parallel.sequence_parallel=true parallel.pipeline_parallel_size=2"},
     {NULL, NULL, NULL}, 0, 0, 0, "cpu", "fp32", 0, 1},
    {"global-aux", "global-aux-v1",
     "the load-balancing loss over the whole step's tokens (one more routing pass per step, its counts "
     "summed over every rank) with expert parallelism",
     100, 15, "model.router_aux_loss_scope=global_batch", EP_UP_TO_2, {NULL, NULL, NULL}, 0, 0, 0, "cpu", "fp32", 0,
     0},
    {"expert-dropout", "expert-dropout-v1",
     "expert dropout 0.1, its masks keyed by each token's origin, with the experts spread over every rank "
     "(ep = the world size)",
     100, 15, "model.expert_dropout=0.1",
     {"", "parallel.expert_parallel_size=2", "parallel.expert_parallel_size=4"}, {NULL, NULL, NULL}, 0, 0, 0, "cpu",
     "fp32", 0, 0},
    /* The 16-bit jobs are dense: bf16 router logits tie often (8 bits of
     * mantissa), and a tie that another layout's rounding breaks the other
     * way changes the routing within a few steps (measured: step 6 at ep 2),
     * which would leave nothing to compare across layouts. */
    {"bf16", "bf16-v1",
     "bf16 mixed precision on a dense model: the 16-bit compute copy, fp32 master weights and moments, "
     "ZeRO 2 over data parallelism",
     100, 15, "bf16.enabled=true model.num_local_experts=0",
     {"zero_optimization.stage=2", "zero_optimization.stage=2", "zero_optimization.stage=2"},
     {NULL, NULL, NULL}, 0, 0, 0, "cpu16", "bf16", 1, 0},
    {"fp16", "fp16-v1",
     "fp16 mixed precision on a dense model with the dynamic loss scaler: overflow steps skipped and the scale "
     "halved, doubled after 8 clean steps; ZeRO 1 over data parallelism",
     100, 15,
     "fp16.enabled=true fp16.initial_scale_power=20 fp16.loss_scale_window=8 fp16.hysteresis=1 "
     "model.num_local_experts=0",
     {"zero_optimization.stage=1", "zero_optimization.stage=1", "zero_optimization.stage=1"}, {NULL, NULL, NULL},
     0, 0, 0, "cpu16", "fp16", 1, 0},
};
const int validate_njobs = (int)(sizeof validate_jobs / sizeof *validate_jobs);

const validate_job_def_t *validate_job_find(const char *name)
{
    for (int i = 0; i < validate_njobs; i++)
        if (!strcmp(validate_jobs[i].name, name))
            return &validate_jobs[i];
    return NULL;
}

int validate_world_index(int world) { return world == 1 ? 0 : world == 2 ? 1 : world == 4 ? 2 : -1; }

static char *joined(const char *key, const char *value)
{
    size_t n = strlen(key) + strlen(value) + 1;
    char *s = fb_malloc(n);
    snprintf(s, n, "%s%s", key, value);
    return s;
}

void validate_sets_make(validate_sets_t *s, const validate_job_def_t *job, int world, int second, long steps,
                        const char *backend, const char *run_dir, const char *tokenizer, const char *corpus)
{
    const int w = validate_world_index(world);
    FB_ASSERT(w >= 0 && steps >= 1 && steps <= job->steps && (!second || job->resume_layout[w]));
    memset(s, 0, sizeof *s);
    const char *layout = second ? job->resume_layout[w] : job->layout[w];
    size_t n = strlen(common_sets) + strlen(job->sets) + strlen(layout) + 3;
    s->words = fb_malloc(n);
    snprintf(s->words, n, "%s %s %s", common_sets, job->sets, layout);
    s->v = fb_calloc(n / 2 + 16, sizeof *s->v);
    for (char *save = NULL, *t = strtok_r(s->words, " ", &save); t; t = strtok_r(NULL, " ", &save))
        s->v[s->n++] = t;
    char num[32];
    int k = 0;
    snprintf(num, sizeof num, "%ld", steps);
    s->owned[k++] = joined("run.steps=", num);
    snprintf(num, sizeof num, "%ld", job->steps);
    s->owned[k++] = joined("scheduler.params.total_num_steps=", num);
    s->owned[k++] = joined("run.backend=", backend);
    s->owned[k++] = joined("run.run_dir=", run_dir);
    if (corpus) {
        s->owned[k++] = joined("data.corpus=", corpus);
        s->owned[k++] = joined("data.tokenizer=", tokenizer);
    }
    if (job->eval_interval > 0) {
        snprintf(num, sizeof num, "%ld", job->eval_interval);
        s->owned[k++] = joined("run.eval_interval=", num);
    }
    if (second)
        s->owned[k++] = joined("run.resume=", "auto");
    else if (job->resume_layout[w])
        /* the checkpoint of the first half, at its last step */
        s->owned[k++] = joined("checkpoint.save_interval=", "0");
    FB_ASSERT(k <= 10);
    for (int i = 0; i < k; i++)
        s->v[s->n++] = s->owned[i];
}

void validate_sets_free(validate_sets_t *s)
{
    for (int i = 0; i < 10; i++)
        free(s->owned[i]);
    free(s->words);
    free(s->v);
    memset(s, 0, sizeof *s);
}

char *validate_layout_text(const validate_job_def_t *job, int world, int second)
{
    static const struct {
        const char *key, *name;
    } names[] = {{"zero_optimization.stage=", "ZeRO "},
                 {"parallel.expert_parallel_size=", "ep "},
                 {"parallel.tensor_parallel_size=", "tp "},
                 {"parallel.pipeline_parallel_size=", "pp "},
                 {"parallel.sequence_parallel=true", "sp"}};
    const int w = validate_world_index(world);
    FB_ASSERT(w >= 0);
    const char *layout = second ? job->resume_layout[w] : job->layout[w];
    strbuf_t b = {0};
    sb_printf(&b, "%d rank%s", world, world == 1 ? "" : "s");
    char *copy = fb_strdup(layout ? layout : "");
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            size_t kl = strlen(names[i].key);
            if (!strncmp(t, names[i].key, kl))
                sb_printf(&b, ", %s%s", names[i].name, t + kl);
        }
    free(copy);
    return b.s;
}
