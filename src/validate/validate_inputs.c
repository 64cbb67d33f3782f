#include "validate/validate_inputs.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/h5tensor.h"
#include "loader/data_source.h"
#include "loader/step_plan.h"
#include "model/model.h"
#include "ops.h"
#include "parallel/groups.h"
#include "util/error.h"
#include "zero/schedule.h"
#include "zero/zero.h"

void validate_write_inputs(const config_t *job_cfg, const char *out, long steps)
{
    /* the weights whole on the one rank: ZeRO 0 initialises the same values
     * as any stage (the partitions are cut from them) */
    config_t whole = *job_cfg;
    whole.zero.stage = 0;
    whole.zero.offload_optimizer = whole.zero.offload_param = 0;
    const config_t *cfg = &whole;
    data_source_t data;
    data_source_open(&data, cfg, 0);
    groups_t groups;
    groups_create(&groups, 1, cfg->model.num_local_experts);
    zero_t *z = zero_create(cfg, &groups, ops_cpu(), cfg->loader.max_tokens_per_batch, cfg->run.seed);
    model_t *m = zero_model(z);

    hid_t f = h5_create(out);
    h5_write_attr_string(f, "config_json", cfg->effective_json);
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
    step_plan_init(&plan, cfg, data.lens, data.n, 1, 0);
    batch_t b = {0};
    for (long s = 0; s < steps; s++) {
        step_plan_next(&plan, s);
        char path[160];
        const double lr = schedule_lr(&cfg->sched, &cfg->optim, s);
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
    batch_free(&b);
    step_plan_free(&plan);
    zero_free(z);
    groups_free(&groups);
    data_source_close(&data);
}
