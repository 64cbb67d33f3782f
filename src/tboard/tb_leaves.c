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

void tb_leaves(const json_t *record, tb_leaf_fn fn, void *ctx)
{
    walk_t w = {fb_calloc(1, 64), 0, 64, fn, ctx};
    const char *key;
    const json_t *child;
    json_object_foreach((json_t *)record, key, child) {
        if (!strcmp(key, "step"))
            continue;
        push(&w, key);
        visit(&w, child);
        w.len = 0;
        w.tag[0] = '\0';
    }
    free(w.tag);
}
