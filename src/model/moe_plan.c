#include "model/moe_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int moe_capacity(double capacity_factor, int T, int K, int E)
{
    if (capacity_factor <= 0.0)
        return 0;
    double c = ceil(capacity_factor * (double)T * (double)K / (double)E);
    return c < 1.0 ? 1 : (int)c;
}

static void plan_reserve(moe_plan_t *p, int T, int E, int K)
{
    if (p->cap_tokens >= T * K && p->offsets && p->E == E)
        return;
    free(p->offsets);
    free(p->row_token);
    free(p->token_rows);
    free(p->routed);
    p->offsets = fb_calloc((size_t)E + 1, sizeof *p->offsets);
    p->row_token = fb_calloc((size_t)T * K, sizeof *p->row_token);
    p->token_rows = fb_calloc((size_t)T * K, sizeof *p->token_rows);
    p->routed = fb_calloc((size_t)E, sizeof *p->routed);
    p->cap_tokens = T * K;
}

void moe_plan_build(moe_plan_t *p, const int32_t *topk_idx, int T, int E, int K, int capacity)
{
    plan_reserve(p, T, E, K);
    p->T = T;
    p->E = E;
    p->K = K;
    p->capacity = capacity;
    int32_t *kept = fb_calloc((size_t)E, sizeof *kept);
    /* slot[t*K+k]: position of the assignment inside its expert, or -1 */
    int32_t *slot = fb_malloc((size_t)T * K * sizeof *slot);
    memset(p->routed, 0, (size_t)E * sizeof *p->routed);
    for (int k = 0; k < K; k++) {
        for (int t = 0; t < T; t++) {
            int e = topk_idx[(size_t)t * K + k];
            FB_ASSERT(e >= 0 && e < E);
            p->routed[e]++;
            if (capacity > 0 && kept[e] >= capacity) {
                slot[(size_t)t * K + k] = -1;
                continue;
            }
            slot[(size_t)t * K + k] = kept[e]++;
        }
    }
    p->offsets[0] = 0;
    for (int e = 0; e < E; e++)
        p->offsets[e + 1] = p->offsets[e] + kept[e];
    p->R = p->offsets[E];
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)t * K + k;
            if (slot[i] < 0) {
                p->token_rows[i] = -1;
                continue;
            }
            int row = p->offsets[topk_idx[i]] + slot[i];
            p->token_rows[i] = row;
            p->row_token[row] = t;
        }
    }
    free(slot);
    free(kept);
}

void moe_plan_free(moe_plan_t *p)
{
    free(p->offsets);
    free(p->row_token);
    free(p->token_rows);
    free(p->routed);
    memset(p, 0, sizeof *p);
}
