/* Which token goes to which expert row: top-k choices, capacity and dropping
 * (docs/model.md, MoE FFN). Computed on the host from the router's choices,
 * so the semantics are the same whatever the backend. */
#ifndef FABULA_MODEL_MOE_PLAN_H
#define FABULA_MODEL_MOE_PLAN_H

#include <stdint.h>

typedef struct moe_plan {
    int T, E, K, R;             /* R = kept assignments = rows of the permuted buffer */
    int capacity;               /* per expert; 0 = dropless */
    int32_t *offsets;           /* host [E+1]: rows of expert e are offsets[e]..offsets[e+1]-1 */
    int32_t *row_token;         /* host [T*K] (first R used) */
    int32_t *token_rows;        /* host [T*K]: row of (t,k) or -1 when dropped */
    long *routed;               /* host [E]: assignments before dropping (for f_e) */
    int32_t *d_row_token, *d_token_rows;  /* backend copies */
    int cap_tokens;
} moe_plan_t;

/* capacity = ceil(capacity_factor * T * K / E), or 0 (dropless) if factor is 0. */
int moe_capacity(double capacity_factor, int T, int K, int E);

/* Assignments are admitted slot-major (every token's first choice in token
 * order, then every second choice, ...) until an expert is full. */
void moe_plan_build(moe_plan_t *p, const int32_t *topk_idx, int T, int E, int K, int capacity);
void moe_plan_free(moe_plan_t *p);

#endif
