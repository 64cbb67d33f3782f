/* A checkpoint's saved config (or a command's own) as the config of
 * `fabula eval` or `fabula generate` (ckpt/ckpt_job_config.h). */
#include <jansson.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_job_config.h"
#include "parallel/world.h"
#include "util/error.h"

void ckpt_job_config(config_t *cfg, json_t *root, const char *what, int from_ckpt, const char *const *sets,
                     int nsets)
{
    const int world = parallel_size();
    if (!json_is_object(root))
        fb_fatal_all(FB_EXIT_DATA, "%s: its config is not a JSON object", what);
    json_object_del(root, "train_batch_size");
    /* the checkpoint holds the weights, and its model section is complete
     * (the imported config.json's keys, a grown vocabulary): the run's
     * model.init_from has done its part (docs/init-from.md) */
    json_t *model = json_object_get(root, "model");
    if (from_ckpt && json_is_object(model))
        json_object_del(model, "init_from");
    json_object_set_new(root, "gradient_accumulation_steps", json_integer(1));
    json_t *par = json_object_get(root, "parallel");
    json_t *ep = par ? json_object_get(par, "expert_parallel_size") : NULL;
    if (ep && json_is_integer(ep) && (json_integer_value(ep) < 1 || world % json_integer_value(ep) != 0))
        json_object_set_new(par, "expert_parallel_size", json_integer(1));
    /* the training run's tensor and pipeline split are its layout, not the
     * model's: eval and generate hold whole layers (the checkpoint stores
     * every tensor whole, docs/checkpoint.md) */
    if (from_ckpt && json_is_object(par)) {
        json_object_del(par, "tensor_parallel_size");
        json_object_del(par, "pipeline_parallel_size");
        json_object_del(par, "pipeline_layers");
        json_object_del(par, "virtual_pipeline_stages");
        json_object_del(par, "sequence_parallel");
    }
    if (from_ckpt)
        json_object_del(root, "tensor_parallel");
    config_load_object(cfg, root, sets, nsets, world, parallel_rank() == 0);
    json_decref(root);
}

void ckpt_job_config_read(config_t *cfg, const char *ckpt, const char *const *sets, int nsets, long *step)
{
    char *json_text = NULL, why[512] = "";
    int code = ckpt_read_config(ckpt, &json_text, step, why, sizeof why);
    if (code != FB_EXIT_OK)
        fb_fatal_all(code, "--checkpoint %s: %s", ckpt, why);
    json_error_t err;
    json_t *root = json_loads(json_text, 0, &err);
    free(json_text);
    if (!root)
        fb_fatal_all(FB_EXIT_DATA, "checkpoint %s: its config is not JSON: %s", ckpt, err.text);
    char what[600];
    snprintf(what, sizeof what, "checkpoint %s", ckpt);
    ckpt_job_config(cfg, root, what, 1, sets, nsets);
    /* the model is sized by that config, which is the file's word: its
     * tensors must be there, and stored, before anything is allocated */
    code = ckpt_check_model(ckpt, &cfg->model, why, sizeof why);
    if (code != FB_EXIT_OK)
        fb_fatal_all(code, "--checkpoint %s: %s", ckpt, why);
}
