/* The hook calls around each block of a pass, in one place: a real pass
 * and an empty micro-batch's pass both go through them, so every rank
 * issues the same hook collectives in the same order. */
#include "model/model_impl.h"

void model_block_begin(model_t *m, int block, int backward)
{
    /* tied: the head's weight is block 0's (the stage holding both; split over
     * stages, the last one's head is a copy in its own block) */
    const int head = block == m->mc.num_hidden_layers + 1, tied = m->mc.tie_word_embeddings && m->has_embed && m->has_head;
    if (block == 0 && backward) {
        /* tied: block 0's gradient has been acquired since the head */
        if (!tied)
            model_grads_acquire(m, 0);
        return;
    }
    /* With tied embeddings the head's weight is block 0's embedding; in
     * the backward its gradient lands in block 0, which stays acquired
     * until the embedding's own backward at the end. */
    if (head && tied) {
        model_params_acquire(m, 0, backward);
        if (backward)
            model_grads_acquire(m, 0);
    }
    model_params_acquire(m, block, backward);
    if (backward)
        model_grads_acquire(m, block);
}

void model_block_end(model_t *m, int block, int backward)
{
    const int head = block == m->mc.num_hidden_layers + 1, tied = m->mc.tie_word_embeddings && m->has_embed && m->has_head;
    if (block == 0 && backward) {
        model_grads_release(m, 0);
        return;
    }
    model_params_release(m, block, backward);
    if (head && tied)
        model_params_release(m, 0, backward);
    if (backward)
        model_grads_release(m, block);
}
