/* "fp16", "bf16" and "gradient_clipping". fp16 defaults are DeepSpeed's
 * dynamic loss scaler's (deepspeed/runtime/fp16/loss_scaler.py and
 * runtime/constants.py): scale 2^16, window 1000, hysteresis 2, min 1. */
#include "config/config_internal.h"

static const cj_inert_t fp16_inert[] = {
    {"auto_cast", CJ_BOOL},                     /* fabula casts inside its kernels */
    {"fp16_master_weights_and_grads", CJ_BOOL}, /* master weights are always fp32 */
};

static const cj_inert_t bf16_inert[] = {
    {"immediate_grad_update", CJ_BOOL},
};

static void read_fp16(cj_ctx_t *c, fp16_config_t *f)
{
    cj_section(c, "fp16");
    f->enabled = cj_bool(c, "fp16.enabled", 0);
    f->loss_scale = cj_real(c, "fp16.loss_scale", 0.0);
    if (!(f->loss_scale >= 0))
        cj_invalid(c, "fp16.loss_scale", "a number >= 0 (0 = dynamic loss scaling)");
    f->initial_scale_power = cj_int(c, "fp16.initial_scale_power", 16);
    if (f->initial_scale_power < 0 || f->initial_scale_power > 64)
        cj_invalid(c, "fp16.initial_scale_power", "an integer in [0, 64] (initial scale 2^power)");
    f->loss_scale_window = cj_int(c, "fp16.loss_scale_window", 1000);
    if (f->loss_scale_window <= 0)
        cj_invalid(c, "fp16.loss_scale_window", "a positive integer");
    f->hysteresis = cj_int(c, "fp16.hysteresis", 2);
    if (f->hysteresis < 1)
        cj_invalid(c, "fp16.hysteresis", "an integer >= 1");
    f->min_loss_scale = cj_real(c, "fp16.min_loss_scale", 1.0);
    if (!(f->min_loss_scale > 0))
        cj_invalid(c, "fp16.min_loss_scale", "a number > 0");
    f->consecutive_hysteresis = cj_bool(c, "fp16.consecutive_hysteresis", 0);
    cj_accept_inert(c, "fp16", fp16_inert, sizeof fp16_inert / sizeof *fp16_inert);
}

void config_read_precision(cj_ctx_t *c, config_t *cfg)
{
    read_fp16(c, &cfg->fp16);
    cj_section(c, "bf16");
    cfg->bf16_enabled = cj_bool(c, "bf16.enabled", 0);
    cj_accept_inert(c, "bf16", bf16_inert, sizeof bf16_inert / sizeof *bf16_inert);
    if (cfg->fp16.enabled && cfg->bf16_enabled)
        cj_error(c, "fp16.enabled and bf16.enabled are both true: choose one (as DeepSpeed requires)");

    /* DeepSpeed clips only when its config says so; fabula's default config
     * clips at 1.0. A DeepSpeed file without the key runs as DeepSpeed runs
     * it, and the run says so once ("auto" and null stay the default's: the
     * Hugging Face Trainer fills in its max_grad_norm, 1.0). */
    if (c->deepspeed_file && !cj_lookup(NULL, c->user, "gradient_clipping")) {
        cj_put(c, "gradient_clipping", json_real(0.0));
        cj_note(c, "gradient_clipping: not given by %s, a DeepSpeed config: no clipping, as DeepSpeed runs it "
                   "(fabula's own default clips at 1.0: --set gradient_clipping=1.0 to clip)",
                c->deepspeed_file);
    }
    cfg->gradient_clipping = cj_real(c, "gradient_clipping", 0.0);
    if (!(cfg->gradient_clipping >= 0))
        cj_invalid(c, "gradient_clipping", "a number >= 0 (0 = no clipping)");
}
