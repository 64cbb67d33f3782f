/* tokenizer/token_vec.h. */
#include "tokenizer/token_vec.h"

#include <stdlib.h>

#include "util/error.h"

void token_vec_reserve(token_vec_t *v, size_t extra)
{
    if (v->n + extra <= v->cap)
        return;
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + extra)
        cap *= 2;
    v->ids = fb_realloc(v->ids, cap * sizeof *v->ids);
    v->cap = cap;
}

void token_vec_push(token_vec_t *v, int32_t id)
{
    if (v->n == v->cap)
        token_vec_reserve(v, 1);
    v->ids[v->n++] = id;
}

void token_vec_free(token_vec_t *v)
{
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}
