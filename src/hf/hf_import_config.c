/* hf_import_config (hf/hf_import.h): DIR/config.json through config_load,
 * as a config {"model": {"init_from": DIR}} reads it, so that the mapping
 * and its refusals are the training's own; then DIR's weight headers
 * checked against it. */
#include <jansson.h>

#include "hf/hf_import.h"
#include "util/error.h"

void hf_import_config(const char *dir, model_config_t *mc)
{
    /* data keys that let a model of any vocabulary through (the byte
     * tokenizer's minimum does not apply: no data is read) */
    json_t *root = json_pack("{s:{s:s}, s:{s:s, s:i, s:i, s:i}}", "model", "init_from", dir, "data", "tokenizer",
                             "(hf import)", "seq_len", 2, "overlap", 0, "min_seq_len", 2);
    FB_ASSERT(root);
    config_t cfg;
    config_load_object(&cfg, root, NULL, 0, 1, 1);
    json_decref(root);
    *mc = cfg.model;
    config_free(&cfg);
    /* the weights' headers against that config before any caller sizes a
     * model by it: a config.json that says 10^8 rows beside a file of a
     * few kilobytes is refused here, not by a failed allocation */
    char why[1024];
    hf_weights_t *w;
    int code = hf_weights_open(&w, dir, mc, why, sizeof why);
    if (code)
        fb_fatal(code, "%s", why);
    hf_weights_close(w);
}
