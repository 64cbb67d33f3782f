#include "train/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The default config's tiny MoE made smaller still (hidden 64, windows of
 * 64 tokens, 8 of them per step) so that 300 steps take about a minute on
 * one core; the batch triple is fixed by train_batch_size and the
 * micro-batch size, so that 1, 2 and 4 ranks train on the same
 * micro-batches (4, 2 or 1 per rank) and differ only by rounding. The LR
 * schedule spans the whole job whatever --steps says, so that a shorter run
 * is a prefix of the curve. */
static const char *const job_sets[] = {
    "model.hidden_size=64",
    "model.intermediate_size=128",
    "data.train=inputs/sample.jsonl",
    "data.corpus=",
    "data.tokenizer=bytes",
    "data.seq_len=64",
    "data.sampler=lpt",
    "data.packing=best_fit",
    "train_batch_size=8",
    "train_micro_batch_size_per_gpu=2",
    "run.seed=1234",
    "run.resume=none",
    "run.eval_interval=0",
    "checkpoint.save_interval=-1",
    "steps_per_print=50",
    "scheduler.type=WarmupDecayLR",
    "scheduler.params.warmup_min_lr=0",
    "scheduler.params.warmup_max_lr=3e-3",
    "scheduler.params.warmup_num_steps=20",
    "scheduler.params.total_num_steps=300",
    "zero_optimization.stage=0",
    "parallel.expert_parallel_size=1",
};
#define NJOB (sizeof job_sets / sizeof *job_sets)

static char *joined(const char *key, const char *value)
{
    size_t n = strlen(key) + strlen(value) + 1;
    char *s = fb_malloc(n);
    snprintf(s, n, "%s%s", key, value);
    return s;
}

void validate_job_make(validate_job_t *j, long steps, const char *backend, const char *run_dir)
{
    FB_ASSERT(steps >= 1 && steps <= VALIDATE_JOB_STEPS);
    memset(j, 0, sizeof *j);
    j->sets = fb_calloc(NJOB + 4, sizeof *j->sets);
    for (size_t i = 0; i < NJOB; i++)
        j->sets[j->nsets++] = job_sets[i];
    char num[32];
    snprintf(num, sizeof num, "%ld", steps);
    j->owned[0] = joined("run.steps=", num);
    j->owned[1] = joined("run.backend=", backend);
    j->owned[2] = joined("run.run_dir=", run_dir);
    /* the GPU runs the job as it would train: bf16 */
    j->owned[3] = joined("bf16.enabled=", strcmp(backend, "cpu") ? "true" : "false");
    for (int i = 0; i < 4; i++)
        j->sets[j->nsets++] = j->owned[i];
}

void validate_job_free(validate_job_t *j)
{
    for (int i = 0; i < 4; i++)
        free(j->owned[i]);
    free(j->sets);
    memset(j, 0, sizeof *j);
}

validate_result_t validate_compare(const double *losses, long steps, const loss_curve_t *c, const char *backend,
                                   const char *precision, int world_size, const char *blas)
{
    FB_ASSERT(steps >= 1 && steps <= c->steps);
    validate_result_t r;
    memset(&r, 0, sizeof r);
    r.steps = steps;
    if (strcmp(c->backend, backend) != 0 || strcmp(c->precision, precision) != 0) {
        r.tolerance = VALIDATE_TOL_BF16;
        r.rule = "another backend or precision";
    } else if (c->world_size != world_size) {
        r.tolerance = VALIDATE_TOL_LAYOUT;
        r.rule = "same backend, another world size";
    } else if (!strcmp(backend, "cpu") && strcmp(c->blas, blas) != 0) {
        r.tolerance = VALIDATE_TOL_LAYOUT;
        r.rule = "same world size, another BLAS or BLAS kernel";
    } else {
        r.tolerance = 0.0;
        r.rule = "same backend, world size and BLAS: bit-exact";
    }
    for (long i = 0; i < steps; i++) {
        /* a NaN loss never compares equal: it is the worst step at once */
        double d = isnan(losses[i]) ? INFINITY : fabs(losses[i] - c->loss[i]);
        if (d > r.max_diff || (r.worst_step == 0 && losses[i] != c->loss[i])) {
            r.max_diff = d;
            r.worst_step = i + 1;
        }
    }
    /* bit-exact means equal doubles, not merely a 0 difference after rounding */
    int exact = 1;
    for (long i = 0; i < steps && exact; i++)
        exact = memcmp(&losses[i], &c->loss[i], sizeof(double)) == 0;
    r.pass = r.tolerance == 0.0 ? exact : r.max_diff <= r.tolerance;
    return r;
}

char *validate_blas_line(const char *text)
{
    const char *b = strstr(text, "BLAS ");
    if (!b)
        return fb_strdup("unknown");
    b += strlen("BLAS ");
    size_t n = strcspn(b, "\n");
    char *s = fb_malloc(n + 1);
    memcpy(s, b, n);
    s[n] = '\0';
    return s;
}
