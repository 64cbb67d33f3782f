#include "tboard/tb_leaves.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

typedef struct walk {
    char *tag;
    size_t len, cap;
    tb_leaf_fn fn;
    void *ctx;
} walk_t;

/* Appends "/part" (no slash at the top) and returns the old length. */
static size_t push(walk_t *w, const char *part)
{
    const size_t old = w->len, n = strlen(part) + (old ? 1 : 0);
    if (old + n + 1 > w->cap) {
        w->cap = (old + n + 1) * 2;
        w->tag = fb_realloc(w->tag, w->cap);
    }
    if (old)
        w->tag[w->len++] = '/';
    memcpy(w->tag + w->len, part, strlen(part) + 1);
    w->len = old + n;
    return old;
}

static void visit(walk_t *w, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        const json_t *child;
        json_object_foreach((json_t *)v, key, child) {
            size_t old = push(w, key);
            visit(w, child);
            w->len = old;
            w->tag[old] = '\0';
        }
        break;
    }
    case JSON_ARRAY: {
        for (size_t i = 0; i < json_array_size(v); i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            size_t old = push(w, idx);
            visit(w, json_array_get(v, i));
            w->len = old;
            w->tag[old] = '\0';
        }
        break;
    }
    case JSON_INTEGER:
        w->fn(w->ctx, w->tag, v, (double)json_integer_value(v));
        break;
    case JSON_REAL:
        w->fn(w->ctx, w->tag, v, json_real_value(v));
        break;
    case JSON_TRUE:
        w->fn(w->ctx, w->tag, v, 1.0);
        break;
    case JSON_FALSE:
        w->fn(w->ctx, w->tag, v, 0.0);
        break;
    default:
        break;
    }
}

const char *tb_leaves_group(const char *key)
{
    /* TensorBoard groups tags by what precedes their first '/': a scalar
     * at the top of the record would sit ungrouped beside the sections */
    static const struct { const char *key, *group; } groups[] = {
        {"loss", "loss"}, {"lm_loss", "loss"}, {"aux_loss", "loss"}, {"z_loss", "loss"},
        {"valid_lm_loss", "valid"}, {"valid_ppl", "valid"},
        {"lr", "optimizer"}, {"grad_norm", "optimizer"}, {"loss_scale", "optimizer"}, {"skipped", "optimizer"},
        {"tokens", "throughput"}, {"samples", "throughput"}, {"tokens_per_s", "throughput"},
        {"step_time", "throughput"}, {"step_cpu_time", "throughput"}, {"elapsed", "throughput"},
        {"eta_s", "throughput"}, {"model_flops", "throughput"}, {"model_flops_per_s", "throughput"},
        {"mfu", "throughput"},
        {"imbalance", "data"}, {"packing", "data"}, {"max_len", "data"},
        {"dropped", "moe"},
        {"rss_bytes", "monitor"}, {"monitor_overhead_s", "monitor"},
    };
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        if (!strcmp(key, groups[i].key))
            return groups[i].group;
    return "other";
}

void tb_leaves(const json_t *record, tb_leaf_fn fn, void *ctx)
{
    walk_t w = {fb_calloc(1, 64), 0, 64, fn, ctx};
    const char *key;
    const json_t *child;
    json_object_foreach((json_t *)record, key, child) {
        if (!strcmp(key, "step"))
            continue;
        if (!json_is_object(child) && !json_is_array(child))
            push(&w, tb_leaves_group(key));
        push(&w, key);
        visit(&w, child);
        w.len = 0;
        w.tag[0] = '\0';
    }
    free(w.tag);
}
