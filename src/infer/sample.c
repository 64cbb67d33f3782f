/* Sampling (infer/sample.h). Everything after the logits is on the host in
 * double, so a draw depends on the logits and u alone. */
#include "infer/sample.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"

void sample_repetition_penalty(float *logits, int V, const uint8_t *seen, double penalty)
{
    if (!seen || penalty == 1.0)
        return;
    for (int v = 0; v < V; v++)
        if (seen[v])
            logits[v] = logits[v] > 0 ? (float)(logits[v] / penalty) : (float)(logits[v] * penalty);
}

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best])
            best = v;
    return best;
}

typedef struct ranked {
    double p;
    int id;
} ranked_t;

/* ascending probability, then descending id: the order in which top-p
 * removes tokens (the least likely first; of equals the higher id first) */
static int by_prob_up(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return y->id - x->id;
}

static int by_logit_down(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

void sample_distribution(float *logits, int V, const sample_params_t *sp, const uint8_t *seen, double *probs)
{
    FB_ASSERT(sp->temperature > 0 && V > 0);
    sample_repetition_penalty(logits, V, seen, sp->repetition_penalty);
    double kth = -INFINITY;
    if (sp->top_k > 0 && sp->top_k < V) {
        double *sorted = fb_malloc((size_t)V * sizeof *sorted);
        for (int v = 0; v < V; v++)
            sorted[v] = logits[v];
        qsort(sorted, (size_t)V, sizeof *sorted, by_logit_down);
        kth = sorted[sp->top_k - 1];
        free(sorted);
    }
    double mx = -INFINITY;
    for (int v = 0; v < V; v++)
        if (logits[v] >= kth && logits[v] / sp->temperature > mx)
            mx = logits[v] / sp->temperature;
    double sum = 0.0;
    for (int v = 0; v < V; v++) {
        probs[v] = logits[v] >= kth ? exp(logits[v] / sp->temperature - mx) : 0.0;
        sum += probs[v];
    }
    for (int v = 0; v < V; v++)
        probs[v] /= sum;
    if (sp->top_p < 1.0) {
        ranked_t *r = fb_malloc((size_t)V * sizeof *r);
        int n = 0;
        for (int v = 0; v < V; v++)
            if (probs[v] > 0)
                r[n++] = (ranked_t){probs[v], v};
        qsort(r, (size_t)n, sizeof *r, by_prob_up);
        double cum = 0.0;
        for (int i = 0; i + 1 < n; i++) {
            cum += r[i].p;
            if (cum > 1.0 - sp->top_p)
                break;
            probs[r[i].id] = 0.0;
        }
        free(r);
        sum = 0.0;
        for (int v = 0; v < V; v++)
            sum += probs[v];
        for (int v = 0; v < V; v++)
            probs[v] /= sum;
    }
}

int sample_draw(const double *probs, int V, double u)
{
    double sum = 0.0;
    for (int v = 0; v < V; v++)
        sum += probs[v];
    const double target = u * sum;
    double cum = 0.0;
    int last = -1;
    for (int v = 0; v < V; v++) {
        if (probs[v] <= 0)
            continue;
        cum += probs[v];
        last = v;
        if (cum > target)
            return v;
    }
    FB_ASSERT(last >= 0);
    return last;
}

int sample_next(float *logits, int V, const sample_params_t *sp, const uint8_t *seen, double u, double *probs)
{
    if (sp->temperature <= 0) {
        sample_repetition_penalty(logits, V, seen, sp->repetition_penalty);
        return argmax(logits, V);
    }
    sample_distribution(logits, V, sp, seen, probs);
    return sample_draw(probs, V, u);
}
