/* curve_inputs: what the PyTorch reference needs to recompute the first
 * steps of `fabula validate`'s loss curve on its own (validation/
 * check_curve.py): the reference job's initial weights (fabula's
 * initialisation from run.seed), the packed micro-batches of each step (the
 * sampler's and packer's choice, on one rank: the micro-batches do not
 * depend on the layout) and the lr of each update. The losses, gradients
 * and AdamW updates are then the reference's own.
 *
 * usage: curve_inputs JOB OUT.h5 STEPS   (from the source tree: the job
 * reads inputs/sample.jsonl; one rank; a job without a corpus of its own)
 *
 * OUT.h5: /weights/<HF name> float32; root attributes config_json (the
 * job's effective config) and steps; /steps/<s>/lr (float64 scalar) and
 * /steps/<s>/<m>/{tokens,positions,targets,cu_seqlens} (int32) for step s
 * (1-based) and its micro-batch m (0-based, in the step's order). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "io/h5tensor.h"
#include "loader/data_source.h"
#include "loader/step_plan.h"
#include "model/model.h"
#include "ops.h"
#include "parallel/groups.h"
#include "parallel/world.h"
#include "model/config_resolve.h"
#include "util/error.h"
#include "validate/validate_jobs.h"
#include "zero/schedule.h"
#include "zero/zero.h"

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    if (argc != 4 || parallel_size() != 1)
        fb_fatal(FB_EXIT_USAGE, "usage: curve_inputs JOB OUT.h5 STEPS (one rank, from the source tree)");
    const validate_job_def_t *job = validate_job_find(argv[1]);
    if (!job || job->corpus)
        fb_fatal(FB_EXIT_USAGE, "JOB must be a reference job without a corpus of its own, not '%s'", argv[1]);
    const long steps = atol(argv[3]);
    if (steps < 1 || steps > job->steps)
        fb_fatal(FB_EXIT_USAGE, "STEPS must be 1..%ld", job->steps);

    /* the whole job, as `fabula validate` loads it on one rank (only its
     * first steps are planned here) */
    validate_sets_t sets;
    validate_sets_make(&sets, job, 1, 0, job->steps, job->backend, "runs/validate-unused", NULL, NULL);
    config_t cfg;
    config_load(&cfg, NULL, 0, sets.v, sets.n, 1, 0);
    model_config_resolve(&cfg, 0);

    data_source_t data;
    data_source_open(&data, &cfg, 0);
    groups_t groups;
    groups_create(&groups, 1, cfg.model.num_local_experts);
    zero_t *z = zero_create(&cfg, &groups, ops_cpu(), cfg.loader.max_tokens_per_batch, cfg.run.seed);
    model_t *m = zero_model(z);

    hid_t f = h5_create(argv[2]);
    h5_write_attr_string(f, "config_json", cfg.effective_json);
    h5_write_attr_i64(f, "steps", steps);
    const param_table_t *t = model_params_table(m);
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        float *w = fb_malloc(v->numel * sizeof *w);
        model_get_param(m, v, w);
        char path[160];
        snprintf(path, sizeof path, "weights/%s", v->name);
        long long dims[2] = {v->shape[0], v->shape[1]};
        h5_write_f32(f, path, w, v->ndim, dims);
        free(w);
    }

    step_plan_t plan;
    step_plan_init(&plan, &cfg, data.lens, data.n, 1, 0);
    batch_t b = {0};
    for (long s = 0; s < steps; s++) {
        step_plan_next(&plan, s);
        char path[160];
        const double lr = schedule_lr(&cfg.sched, &cfg.optim, s);
        snprintf(path, sizeof path, "steps/%ld/lr", s + 1);
        h5_write_f64(f, path, &lr, 0, NULL);
        for (int mb = 0; mb < plan.nmicro; mb++) {
            const int64_t *ids, *lens;
            int n;
            const int gmb = step_plan_micro(&plan, mb, &ids, &lens, &n);
            if (gmb < 0)
                continue;
            data_source_batch(&data, &b, ids, lens, n);
            long long T = b.T, S = b.nseq + 1;
            snprintf(path, sizeof path, "steps/%ld/%d/tokens", s + 1, gmb);
            h5_write_i32(f, path, b.tokens, 1, &T);
            snprintf(path, sizeof path, "steps/%ld/%d/positions", s + 1, gmb);
            h5_write_i32(f, path, b.positions, 1, &T);
            snprintf(path, sizeof path, "steps/%ld/%d/targets", s + 1, gmb);
            h5_write_i32(f, path, b.targets, 1, &T);
            snprintf(path, sizeof path, "steps/%ld/%d/cu_seqlens", s + 1, gmb);
            h5_write_i32(f, path, b.cu_seqlens, 1, &S);
        }
    }
    h5_close(f);
    printf("curve_inputs: wrote %s: %d tensors, %ld steps\n", argv[2], t->n, steps);
    batch_free(&b);
    step_plan_free(&plan);
    zero_free(z);
    groups_free(&groups);
    data_source_close(&data);
    config_free(&cfg);
    validate_sets_free(&sets);
    parallel_finalize();
    return 0;
}
