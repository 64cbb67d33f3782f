/* model.init_from: DIR, a transformers save_pretrained directory. Its
 * config.json becomes the model section exactly as the "model":
 * "config.json" form reads it (config_model_hf.c: the same mapping and the
 * same refusals); the weights are the trainer's business (src/hf).
 *
 * Keys the user gives next to init_from: a key that only shapes training
 * (the auxiliary losses, capacity, expert dropout, the init std, which the
 * import makes moot) is the user's to set; any other key must say what
 * DIR/config.json says, since the weights were trained for that function
 * (docs/init-from.md). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "config/config_source.h"
#include "io/regular_file.h"
#include "util/error.h"

static const char *const training_only[] = {
    "router_aux_loss_coef", "router_z_loss_coef", "router_aux_loss_scope", "capacity_factor",
    "expert_dropout",       "initializer_range",  "output_router_logits",
    "recompute",
};

static int is_training_only(const char *key)
{
    for (size_t i = 0; i < sizeof training_only / sizeof *training_only; i++)
        if (!strcmp(key, training_only[i]))
            return 1;
    return 0;
}

/* JSON equality with 10000 and 10000.0 the same number. */
static int same_value(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

/* Sets model.KEY in `tree` (creating the section). */
static void put_model_key(json_t *tree, const char *key, json_t *value)
{
    json_t *m = json_object_get(tree, "model");
    if (!json_is_object(m)) {
        m = json_object();
        FB_ASSERT(m && json_object_set_new(tree, "model", m) == 0);
    }
    FB_ASSERT(json_object_set(m, key, value) == 0);
}

char *config_init_from(cj_ctx_t *c)
{
    cj_strs_push(&c->known, "model.init_from");
    json_t *v = cj_lookup(c, c->root, "model.init_from");
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) || !json_string_length(v)) {
        cj_invalid(c, "model.init_from", "a directory saved by transformers' save_pretrained (config.json and "
                                         "*.safetensors)");
        return NULL;
    }
    char real[PATH_MAX];
    if (!realpath(json_string_value(v), real))
        cj_fail(c, "config key 'model.init_from' = \"%s\": %s", json_string_value(v), strerror(errno));
    size_t n = strlen(real) + 16;
    char *file = fb_malloc(n);
    snprintf(file, n, "%s/config.json", real);
    /* a FIFO in its place would block the read below for good; a missing
     * file is the loader's to report (exit 2, naming it) */
    char why[PATH_MAX + 64];
    if (regular_file_check(file, why, sizeof why) == FB_EXIT_DATA)
        fb_fatal_all(FB_EXIT_DATA, "%s", why);
    json_t *hf = source_load_file(c, file);
    if (!json_is_object(hf))
        cj_fail(c, "%s: not a JSON object (model.init_from needs transformers' config.json)", file);
    json_t *um = json_object_get(c->user, "model");
    const char *key;
    json_t *uv;
    if (json_is_object(um))
        json_object_foreach(um, key, uv) {
            if (!strcmp(key, "init_from") || is_training_only(key))
                continue;
            json_t *hv = json_object_get(hf, key);
            /* more vocabulary rows than the file's: the import appends rows
             * (the mean row), as it does for a tokenizer's appended specials */
            if (!strcmp(key, "vocab_size") && json_is_integer(hv) && json_is_integer(uv) &&
                json_integer_value(uv) >= json_integer_value(hv))
                continue;
            char path[160];
            snprintf(path, sizeof path, "model.%s", key);
            if (!hv)
                cj_invalid(c, path, "absent next to model.init_from: %s does not set it, and the imported "
                                    "weights were trained without it", file);
            else if (!same_value(hv, uv)) {
                char *hs = json_dumps(hv, JSON_ENCODE_ANY | JSON_COMPACT);
                cj_invalid(c, path, "%s, the value of %s (model.init_from: the weights are trained for it; "
                                    "only training keys such as router_aux_loss_coef may differ)",
                           hs ? hs : "?", file);
                free(hs);
            }
        }
    /* the file's keys, as if the user had written them (the mapping asks
     * what the user gave), except training keys the user set */
    json_object_foreach(hf, key, uv) {
        if (json_is_object(um) && (is_training_only(key) || !strcmp(key, "vocab_size")) && json_object_get(um, key))
            continue;
        put_model_key(c->user, key, uv);
        put_model_key(c->root, key, uv);
    }
    json_t *abs = json_string(real);
    FB_ASSERT(abs);
    put_model_key(c->root, "init_from", abs);
    json_decref(abs);
    json_decref(hf);
    free(file);
    return fb_strdup(real);
}
