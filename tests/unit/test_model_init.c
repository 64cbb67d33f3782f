/* model_init_weights: the initial weights are a function of (seed, tensor
 * name, element) alone (docs/model.md "Initialisation"), so the threads
 * that draw them change nothing: 1, 2 and 3 threads give the same bits. And
 * the draws are the normal distribution the doc states: per tensor, mean 0
 * and std initializer_range (or std / sqrt(2 L) for the output projections),
 * RMSNorm weights exactly 1. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "model/model.h"
#include "ops.h"
#include "util/error.h"

#include "testlib.h"

/* Every parameter of the model, on the host, in table order. */
static float *all_params(model_t *m, size_t *n)
{
    const param_table_t *t = model_params_table(m);
    size_t total = 0;
    for (int i = 0; i < t->n; i++)
        total += t->views[i].numel;
    float *out = fb_malloc(total * sizeof *out);
    size_t at = 0;
    for (int i = 0; i < t->n; i++) {
        model_get_param(m, &t->views[i], out + at);
        at += t->views[i].numel;
    }
    *n = total;
    return out;
}

int main(void)
{
    config_t cfg;
    /* wide enough that every matrix takes the threaded path */
    const char *sets[] = {"model.hidden_size=256", "model.intermediate_size=512"};
    config_load(&cfg, NULL, 0, sets, 2, 1, 0);
    const model_config_t *mc = &cfg.model;
    model_t *m = model_create(mc, ops_cpu(), 16);
    const int threads[3] = {1, 2, 3};
    float *first = NULL;
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
        omp_set_num_threads(threads[k]);
        model_init_weights(m, 1234);
        size_t got;
        float *p = all_params(m, &got);
        if (!first) {
            first = p;
            n = got;
            continue;
        }
        EXPECT(got == n && !memcmp(first, p, n * sizeof *p), "%d threads: the initial weights differ from 1 thread's",
               threads[k]);
        free(p);
    }

    const param_table_t *t = model_params_table(m);
    size_t at = 0;
    int tensors = 0;
    for (int i = 0; i < t->n; i++) {
        const param_view_t *v = &t->views[i];
        const float *w = first + at;
        at += v->numel;
        if (v->init == PARAM_INIT_ONES) {
            int ones = 1;
            for (size_t j = 0; j < v->numel; j++)
                ones &= w[j] == 1.0f;
            EXPECT(ones, "%s: RMSNorm weights must be 1", v->name);
            continue;
        }
        if (v->numel < 20000)
            continue; /* too few draws for a 3% test */
        double s = mc->initializer_range;
        if (v->init == PARAM_INIT_NORMAL_SCALED)
            s /= sqrt(2.0 * mc->num_hidden_layers);
        double sum = 0, sq = 0;
        for (size_t j = 0; j < v->numel; j++) {
            sum += w[j];
            sq += (double)w[j] * w[j];
        }
        const double mean = sum / (double)v->numel, sd = sqrt(sq / (double)v->numel - mean * mean);
        /* 5 standard errors: a sound normal draw fails this about once in 10^6 */
        const double se_mean = s / sqrt((double)v->numel), se_sd = s / sqrt(2.0 * (double)v->numel);
        EXPECT(fabs(mean) < 5 * se_mean && fabs(sd - s) < 5 * se_sd, "%s: mean %.3g std %.5g, expected 0 and %.5g",
               v->name, mean, sd, s);
        tensors++;
    }
    printf("test_model_init: %zu parameters identical at 1/2/3 threads; %d tensors with mean 0 and the stated std; "
           "%d checks, %d failures\n", n, tensors, checks, failures);
    free(first);
    model_free(m);
    config_free(&cfg);
    return failures ? 1 : 0;
}
