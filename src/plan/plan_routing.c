/* plan/plan_routing.h: a pilot run's routing, read back for `plan time`. */
#include "plan/plan_routing.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/regular_file.h"
#include "model/model.h"
#include "util/error.h"

static int moe_layer_count(const model_config_t *mc)
{
    int n = 0;
    for (int i = 0; i < mc->num_hidden_layers; i++)
        n += model_layer_is_moe(mc, i);
    return n;
}

/* One line's "expert_tokens" appended to r->loads (its shape checked). */
static void read_loads(plan_routing_t *r, json_t *et, const model_config_t *mc, const char *flag, const char *path,
                       long lineno)
{
    const int L = moe_layer_count(mc), E = mc->num_local_experts;
    if (!json_is_array(et) || (int)json_array_size(et) != L)
        fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"expert_tokens\" must be an array of %d MoE layer(s) "
                 "(this config's model)", flag, path, lineno, L);
    r->loads = fb_realloc(r->loads, (size_t)(r->steps + 1) * L * E * sizeof *r->loads);
    for (int l = 0; l < L; l++) {
        json_t *row = json_array_get(et, (size_t)l);
        if (!json_is_array(row) || (int)json_array_size(row) != E)
            fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"expert_tokens\"[%d] must be an array of %d "
                     "expert(s) (this config's model)", flag, path, lineno, l, E);
        for (int e = 0; e < E; e++) {
            json_t *x = json_array_get(row, (size_t)e);
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"expert_tokens\"[%d][%d] must be a "
                         "non-negative integer", flag, path, lineno, l, e);
            r->loads[((size_t)r->steps * L + l) * E + e] = (double)json_integer_value(x);
        }
    }
    r->steps++;
    r->layers = L;
    r->experts = E;
}

/* One line's per-layer kept shares ("moe_layers"[i]: "microbatches",
 * "kept_share_mean", "kept_share_sd"; train since 2026-12-04) into the
 * routing spread's sums; a line without them adds nothing. */
static void read_spread(plan_routing_t *r, json_t *ml, json_t *tokens, const model_config_t *mc, const char *flag,
                        const char *path, long lineno)
{
    const int L = moe_layer_count(mc);
    if (!json_is_array(ml) || (int)json_array_size(ml) != L)
        fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"moe_layers\" must be an array of %d MoE layer(s) "
                 "(this config's model)", flag, path, lineno, L);
    double line_mb = -1;
    for (int l = 0; l < L; l++) {
        json_t *o = json_array_get(ml, (size_t)l);
        if (!json_is_object(o))
            fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"moe_layers\"[%d] must be an object", flag, path,
                     lineno, l);
        json_t *n = json_object_get(o, "microbatches"), *mean = json_object_get(o, "kept_share_mean"),
               *sd = json_object_get(o, "kept_share_sd");
        if (!n && !mean && !sd)
            continue;
        if (!json_is_integer(n) || json_integer_value(n) < 1 || !json_is_number(mean) ||
            !(json_number_value(mean) > 0 && json_number_value(mean) <= 1) ||
            (sd && (!json_is_number(sd) || !(json_number_value(sd) >= 0 && json_number_value(sd) <= 1))) ||
            (!sd && json_integer_value(n) >= 2))
            fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"moe_layers\"[%d]: \"microbatches\" must be a "
                     "positive integer, \"kept_share_mean\" a share in (0, 1] and \"kept_share_sd\" (given with "
                     "2 or more micro-batches) a standard deviation in [0, 1]", flag, path, lineno, l);
        const double nb = (double)json_integer_value(n);
        if (line_mb >= 0 && nb != line_mb)
            fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"moe_layers\"[%d] counts %.0f micro-batches, "
                     "another layer %.0f: not one run's step", flag, path, lineno, l, nb, line_mb);
        line_mb = nb;
        if (nb >= 2) {
            const double rel = json_number_value(sd) / json_number_value(mean);
            r->spread_sq += (nb - 1.0) * rel * rel;
            r->spread_dof += nb - 1.0;
        }
    }
    if (line_mb >= 2 && tokens) {
        r->spread_tokens += (double)json_integer_value(tokens);
        r->spread_microbatches += line_mb;
    }
}

void plan_routing_read(const char *path, const char *flag, const model_config_t *mc, plan_routing_t *r)
{
    memset(r, 0, sizeof *r);
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "fabula plan time: %s %s: %s", flag, path, strerror(errno));
    if (code)
        fb_fatal(code, "fabula plan time: %s %s", flag, why);
    const double per_token = (double)model_assignments_per_token(mc);
    double dropped = 0, assigned = 0;
    long lineno = 0, used = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (!o || !json_is_object(o))
            fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: not a JSON object (%s)", flag, path, lineno,
                     o ? "another JSON value" : e.text);
        json_t *d = json_object_get(o, "dropped"), *t = json_object_get(o, "tokens");
        if (d && t) {
            if (!json_is_integer(d) || !json_is_integer(t) || json_integer_value(d) < 0 || json_integer_value(t) < 0)
                fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s:%ld: \"dropped\" and \"tokens\" must be "
                         "non-negative integers", flag, path, lineno);
            dropped += (double)json_integer_value(d);
            assigned += (double)json_integer_value(t) * per_token;
            used++;
        }
        json_t *et = json_object_get(o, "expert_tokens");
        if (et && config_model_is_moe(mc))
            read_loads(r, et, mc, flag, path, lineno);
        json_t *ml = json_object_get(o, "moe_layers");
        if (ml && config_model_is_moe(mc))
            read_spread(r, ml, d && t ? t : NULL, mc, flag, path, lineno);
        json_decref(o);
    }
    const int read_err = ferror(f);
    free(line);
    fclose(f);
    if (read_err)
        fb_fatal(FB_EXIT_IO, "fabula plan time: %s %s: read error", flag, path);
    if (used == 0)
        fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s: no line with \"dropped\" and \"tokens\" "
                 "(a train run's metrics.jsonl has them)", flag, path);
    if (dropped > assigned)
        fb_fatal(FB_EXIT_DATA, "fabula plan time: %s %s: %.0f dropped of %.0f assignments: not this "
                 "config's model (top-k x MoE layers = %.0f a token)?", flag, path, dropped, assigned, per_token);
    r->dropped = dropped > 0 ? dropped / assigned : 0.0;
}

void plan_routing_apply(const plan_routing_t *r, plan_workload_t *w)
{
    w->routing_steps = r->steps, w->routing_layers = r->layers, w->routing_experts = r->experts;
    w->routing_loads = r->loads;
    if (r->spread_dof > 0 && r->spread_microbatches > 0) {
        w->routing_spread = sqrt(r->spread_sq / r->spread_dof);
        w->routing_spread_tokens = r->spread_tokens / r->spread_microbatches;
    }
}

void plan_routing_check_dropped(const model_config_t *mc, double dropped, const char *flag)
{
    if (dropped > 0 && mc->capacity_factor <= 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan time: %s %g: model.capacity_factor is 0 (dropless): this model "
                 "drops nothing", flag, dropped);
    if (dropped > 0 && model_assignments_per_token(mc) == 0)
        fb_fatal(FB_EXIT_USAGE, "fabula plan time: --dropped: the model has no MoE layer");
}
