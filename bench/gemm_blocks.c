/* What cutting a GEMM into blocks costs (kernels/cpu/matmul.c, mm_cut):
 * the bench model's matmul shapes (bench/configs/cpu_bench.json: 2048
 * tokens, hidden 512, FFN 1024/2048; forward x W^T, backward dY W and
 * dY^T X) through CBLAS on one BLAS thread, uncut and cut along C's longer
 * side into blocks of 1024, 512, 384, 256 and 128, the blocks in one
 * OpenMP loop at OMP_NUM_THREADS threads. Prints GFLOP/s (the best of 7
 * runs) per shape and block, and whether each cut gives the uncut GEMM's
 * bits (on OpenBLAS's Haswell kernels it does not: docs/cpu-threads.md).
 *
 *   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=T bench/fabula-gemm-blocks */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCUTS 6
static const int cuts[NCUTS] = {0, 1024, 512, 384, 256, 128}; /* 0: uncut */

typedef struct {
    int M, N, K, ta, tb;
    const char *what;
} shape_t;

static const shape_t shapes[] = {
    {2048, 512, 512, 0, 1, "q/o forward"},      {2048, 2048, 512, 0, 1, "dense up"},
    {2048, 512, 2048, 0, 1, "dense down"},      {2048, 512, 2048, 0, 0, "dense dX"},
    {2048, 512, 2048, 1, 0, "dense dW (down)"}, {512, 512, 2048, 1, 0, "q/o dW"},
    {8192, 512, 512, 0, 1, "q/o, 8192 tokens"}, {512, 1024, 512, 0, 1, "expert up (512 rows)"},
};

static void run(float *C, const float *A, const float *B, const shape_t *s, int block)
{
    const int by_rows = s->M >= s->N, len = by_rows ? s->M : s->N;
    const int bs = block > 0 && block < len ? block : len, nb = (len + bs - 1) / bs;
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
#pragma omp parallel for schedule(static) if (nb > 1)
    for (int i = 0; i < nb; i++) {
        int lo = i * bs, hi = lo + bs < len ? lo + bs : len, m = s->M, n = s->N;
        const float *a = A, *b = B;
        float *c = C;
        if (by_rows) {
            a = s->ta ? A + lo : A + (size_t)lo * s->K;
            m = hi - lo;
            c = C + (size_t)lo * s->N;
        } else {
            b = s->tb ? B + (size_t)lo * s->K : B + lo;
            n = hi - lo;
            c = C + lo;
        }
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, m, n, s->K,
                    1.0f, a, lda, b, ldb, 0.0f, c, s->N);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        printf("usage: OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=T %s\n"
               "GFLOP/s of the bench model's GEMM shapes uncut and cut into blocks (kernels/cpu/matmul.c);\n"
               "'=' after a figure: that cut gives the uncut GEMM's bits, '!' it does not.\n",
               argv[0]);
        return strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ? 0 : 2;
    }
    const size_t big = (size_t)8192 * 2048;
    float *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B), *C = malloc(big * sizeof *C),
          *C0 = malloc(big * sizeof *C0);
    if (!A || !B || !C || !C0) {
        fprintf(stderr, "fabula-gemm-blocks: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < big; i++) {
        A[i] = (float)(i % 977) / 977.0f - 0.5f;
        B[i] = (float)(i % 1013) / 1013.0f - 0.5f;
    }
    printf("%-22s %-13s", "M x N x K op", "matmul");
    printf(" %8s", "uncut");
    for (int q = 1; q < NCUTS; q++)
        printf(" %8d", cuts[q]);
    printf("   GFLOP/s, %d thread(s)\n", omp_get_max_threads());
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape_t *s = &shapes[si];
        const size_t nc = (size_t)s->M * s->N;
        printf("%5d x %5d x %5d %c%c %-13s", s->M, s->N, s->K, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->what);
        run(C0, A, B, s, 0);
        for (int q = 0; q < NCUTS; q++) {
            double best = 1e30;
            for (int r = 0; r < 7; r++) {
                double t = omp_get_wtime();
                run(C, A, B, s, cuts[q]);
                t = omp_get_wtime() - t;
                best = t < best ? t : best;
            }
            int same = memcmp(C, C0, nc * sizeof *C) == 0;
            printf(" %7.1f%c", 2.0 * s->M * s->N * s->K / best / 1e9, same ? '=' : '!');
        }
        printf("\n");
    }
    free(A), free(B), free(C), free(C0);
    return 0;
}
