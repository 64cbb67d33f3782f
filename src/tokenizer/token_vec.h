/* A growable buffer of token ids, the output of every encoder: beneath
 * tokenizer.c and the BPE merges it calls alike. */
#ifndef FABULA_TOKENIZER_TOKEN_VEC_H
#define FABULA_TOKENIZER_TOKEN_VEC_H

#include <stddef.h>
#include <stdint.h>

/* A growable id buffer (encode appends); {0} is empty. */
typedef struct token_vec {
    int32_t *ids;
    size_t n, cap;
} token_vec_t;

void token_vec_push(token_vec_t *v, int32_t id);
void token_vec_free(token_vec_t *v);
/* Makes room for `extra` more ids. */
void token_vec_reserve(token_vec_t *v, size_t extra);

#endif
