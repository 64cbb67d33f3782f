/* bench/tensorboard.sh's direct measure: the time train_tboard_scalars (the
 * hook at the end of train_log_step) takes per step, on the records of a
 * real run's metrics.jsonl, writing TensorBoard events and/or csv_monitor
 * files into OUT_DIR.
 *
 *   fabula-tboard-bench METRICS.JSONL OUT_DIR tb|csv|both [REPEAT]
 *   fabula-tboard-bench --hist N
 *
 * Prints "records N scalars_per_record S us_per_record U"; with --hist, the
 * histogram binning rate over N normal(0, 0.02) values, "ns_per_element E". */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "tboard/tb_hist.h"
#include "train/train_tboard.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t count_leaves(const json_t *j)
{
    size_t n = 0;
    const char *k;
    const json_t *v;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach((json_t *)j, k, v) n += count_leaves(v);
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) n += count_leaves(v);
    } else if (json_is_number(j) || json_is_boolean(j)) {
        n = 1;
    }
    return n;
}

/* Binning rate of tb_hist_add on weights of a typical spread. */
static int bench_hist(size_t n)
{
    float *x = malloc(n * sizeof *x);
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        double u = 0.0;
        for (int k = 0; k < 12; k++) { /* Irwin-Hall: close enough to normal */
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            u += (double)(st >> 11) / 9007199254740992.0;
        }
        x[i] = (float)((u - 6.0) * 0.02);
    }
    const size_t K = tb_hist_sums_len();
    double *sums = malloc(K * sizeof *sums), exts[TB_HIST_EXTS];
    tb_hist_reset(sums, exts);
    const double t0 = now();
    tb_hist_add(sums, exts, x, n);
    const double dt = now() - t0;
    printf("elements %zu ns_per_element %.1f (num %.0f)\n", n, 1e9 * dt / (double)n, sums[TB_HIST_NUM]);
    free(sums);
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--hist"))
        return bench_hist((size_t)atol(argv[2]));
    if (argc < 4) {
        fprintf(stderr, "usage: fabula-tboard-bench METRICS.JSONL OUT_DIR tb|csv|both [REPEAT]\n");
        return 2;
    }
    const int repeat = argc > 4 ? atoi(argv[4]) : 1;
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    json_t **recs = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, JSON_PRESERVE_ORDER, &err);
        if (!j)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            recs = realloc(recs, cap * sizeof *recs);
        }
        recs[n++] = j;
    }
    free(line);
    fclose(f);
    if (!n) {
        fprintf(stderr, "%s: no records\n", argv[1]);
        return 1;
    }
    config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    char tb[4096], csv[4096];
    snprintf(tb, sizeof tb, "%s/tensorboard", argv[2]);
    snprintf(csv, sizeof csv, "%s/csv_monitor", argv[2]);
    cfg.tensorboard.enabled = strcmp(argv[3], "csv") != 0;
    cfg.tensorboard.dir = tb;
    cfg.csv_monitor.enabled = strcmp(argv[3], "tb") != 0;
    cfg.csv_monitor.dir = csv;
    train_tboard_t t;
    train_tboard_open(&t, &cfg, 1);
    double total = 0.0;
    long step = 1;
    for (int r = 0; r < repeat; r++)
        for (size_t i = 0; i < n; i++) {
            const double t0 = now();
            train_tboard_scalars(&t, recs[i], step++);
            total += now() - t0;
        }
    train_tboard_close(&t);
    printf("records %zu scalars_per_record %zu us_per_record %.1f\n", n * (size_t)repeat, count_leaves(recs[0]) - 1,
           1e6 * total / ((double)n * repeat));
    for (size_t i = 0; i < n; i++)
        json_decref(recs[i]);
    free(recs);
    return 0;
}
