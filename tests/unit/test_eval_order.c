/* The order evaluations take a split's samples in (src/loader/eval_order.h):
 * a worked example from the definition, then on random splits the
 * implementation against a reference built another way (the bit-reversal
 * permutation by its recursive construction, the novel and sample orders by
 * sorting on keys, not by buckets and rounds), and the promises: a
 * permutation, the first k samples covering min(k, novels) novels and every
 * genre from k = genres on, the same answer for the samples given in
 * another order of ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/eval_order.h"
#include "rng.h"
#include "testlib.h"

/* Novels A (genre 1, ids 0..4), B (genre 0, ids 5, 6), C (genre 1, id 7).
 * Novel order: the first novel of each genre by genre (B, A), then the
 * second (C). Spreads: A's 5 positions 0 4 2 1 3 (0 4 2 6 1 5 3 7 without
 * 6, 5 and 7), B's 0 1, C's 0. Rounds: B0 A0 C0 | B1 A4 | A2 | A1 | A3. */
static void test_worked_example(void)
{
    const int32_t novel[8] = {10, 10, 10, 10, 10, 11, 11, 12};
    const uint8_t genre[8] = {1, 1, 1, 1, 1, 0, 0, 1};
    const int64_t want[8] = {5, 0, 7, 6, 4, 2, 1, 3};
    int64_t order[8];
    eval_order_make(novel, genre, 8, order);
    EXPECT(memcmp(order, want, sizeof want) == 0, "order %lld %lld %lld %lld %lld %lld %lld %lld",
           (long long)order[0], (long long)order[1], (long long)order[2], (long long)order[3], (long long)order[4],
           (long long)order[5], (long long)order[6], (long long)order[7]);
    int64_t novels;
    int genres;
    eval_order_coverage(novel, genre, order, 2, &novels, &genres);
    EXPECT(novels == 2 && genres == 2, "first 2: %lld novels, %d genres", (long long)novels, genres);
    eval_order_coverage(novel, genre, order, 3, &novels, &genres);
    EXPECT(novels == 3 && genres == 2, "first 3: %lld novels, %d genres", (long long)novels, genres);
}

/* The bit-reversal permutation of 0..2^bits-1 by its recursive form:
 * rev(2P) = 2 rev(P), then 2 rev(P) + 1. */
static void bitrev_recursive(int64_t *out, int bits)
{
    out[0] = 0;
    int64_t len = 1;
    for (int b = 0; b < bits; b++) {
        for (int64_t i = 0; i < len; i++)
            out[i] *= 2;
        for (int64_t i = 0; i < len; i++)
            out[len + i] = out[i] + 1;
        len *= 2;
    }
}

typedef struct sort_key {
    int64_t a, b, id;
} sort_key_t;

static int key_cmp(const void *x, const void *y)
{
    const sort_key_t *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

/* The definition of eval_order.h, by sorting: a sample's key is (its rank
 * in its novel's spread, its novel's rank in the interleaved novel order);
 * a novel's key is (its rank among its genre's novels, its genre). */
static void reference_order(const int32_t *novel, const uint8_t *genre, int64_t n, int64_t nnovels, int64_t *order)
{
    /* the test's novels are 0..nnovels-1 */
    int64_t *count = calloc((size_t)nnovels, sizeof *count);
    int64_t *within = malloc((size_t)n * sizeof *within); /* position of sample i in its novel */
    for (int64_t i = 0; i < n; i++)
        within[i] = count[novel[i]]++;
    int novel_genre[4096];
    for (int64_t i = 0; i < n; i++)
        novel_genre[novel[i]] = genre[i];
    sort_key_t *nk = malloc((size_t)nnovels * sizeof *nk);
    int64_t seen_in_genre[256] = {0};
    int64_t m = 0;
    for (int64_t v = 0; v < nnovels; v++)
        if (count[v] > 0)
            nk[m++] = (sort_key_t){seen_in_genre[novel_genre[v]]++, novel_genre[v], v};
    qsort(nk, (size_t)m, sizeof *nk, key_cmp);
    int64_t *novel_rank = malloc((size_t)nnovels * sizeof *novel_rank);
    for (int64_t r = 0; r < m; r++)
        novel_rank[nk[r].id] = r;
    sort_key_t *sk = malloc((size_t)n * sizeof *sk);
    int64_t *perm = malloc(sizeof *perm * 65536);
    for (int64_t i = 0; i < n; i++) {
        int64_t len = count[novel[i]];
        int bits = 0;
        while (((int64_t)1 << bits) < len)
            bits++;
        bitrev_recursive(perm, bits);
        int64_t rank = 0;
        for (int64_t j = 0; j < ((int64_t)1 << bits); j++) {
            if (perm[j] >= len)
                continue;
            if (perm[j] == within[i])
                break;
            rank++;
        }
        sk[i] = (sort_key_t){rank, novel_rank[novel[i]], i};
    }
    qsort(sk, (size_t)n, sizeof *sk, key_cmp);
    for (int64_t i = 0; i < n; i++)
        order[i] = sk[i].id;
    free(count);
    free(within);
    free(nk);
    free(novel_rank);
    free(sk);
    free(perm);
}

static void test_random_splits(void)
{
    int mismatches = 0, coverage_bad = 0, not_perm = 0;
    for (uint64_t trial = 0; trial < 200; trial++) {
        const int64_t nnovels = 1 + (int64_t)(fb_hash2(trial, 1) % 40);
        const int ngenres = 1 + (int)(fb_hash2(trial, 2) % 9);
        int32_t *novel = malloc(sizeof *novel * 20000);
        uint8_t *genre = malloc(20000);
        int64_t n = 0;
        int present[256] = {0}, npresent = 0;
        /* novels in file order, each a run of samples, some very uneven */
        for (int64_t v = 0; v < nnovels; v++) {
            int64_t m = 1 + (int64_t)(fb_hash2(trial, 100 + (uint64_t)v) % (v % 7 == 0 ? 300 : 20));
            uint8_t g = (uint8_t)(fb_hash2(trial, 1000 + (uint64_t)v) % (uint64_t)ngenres);
            if (!present[g]++)
                npresent++;
            for (int64_t k = 0; k < m; k++) {
                novel[n] = (int32_t)v;
                genre[n] = g;
                n++;
            }
        }
        int64_t *order = malloc((size_t)n * sizeof *order), *ref = malloc((size_t)n * sizeof *ref);
        eval_order_make(novel, genre, n, order);
        reference_order(novel, genre, n, nnovels, ref);
        mismatches += memcmp(order, ref, (size_t)n * sizeof *order) != 0;
        char *hit = calloc((size_t)n, 1);
        for (int64_t i = 0; i < n; i++)
            if (order[i] >= 0 && order[i] < n)
                hit[order[i]]++;
        for (int64_t i = 0; i < n; i++)
            not_perm += hit[i] != 1;
        for (int64_t k = 1; k <= n; k += 1 + k / 8) {
            int64_t novels;
            int genres;
            eval_order_coverage(novel, genre, order, k, &novels, &genres);
            int64_t want_novels = k < nnovels ? k : nnovels;
            int want_genres = k < npresent ? (int)k : npresent;
            coverage_bad += novels != want_novels || genres < want_genres;
        }
        free(hit);
        free(order);
        free(ref);
        free(novel);
        free(genre);
    }
    EXPECT(mismatches == 0, "%d of 200 random splits differ from the reference order", mismatches);
    EXPECT(not_perm == 0, "%d ids missing or repeated", not_perm);
    EXPECT(coverage_bad == 0, "%d prefixes cover fewer novels or genres than promised", coverage_bad);
}

/* Novel ids need not be dense or start at 0, and a split's samples may come
 * with their novels' ids in any order of rows: the order is by novel id. */
static void test_sparse_ids(void)
{
    const int32_t novel[6] = {907, 3, 907, 3, 3, 50};
    const uint8_t genre[6] = {2, 2, 2, 2, 2, 2};
    /* novels by id: 3 (ids 1, 3, 4), 50 (id 5), 907 (ids 0, 2); one genre.
     * Spreads: 3: positions 0 2 1 -> ids 1 4 3; 907: 0 1 -> 0 2.
     * Rounds: 1 5 0 | 4 2 | 3 */
    const int64_t want[6] = {1, 5, 0, 4, 2, 3};
    int64_t order[6];
    eval_order_make(novel, genre, 6, order);
    EXPECT(memcmp(order, want, sizeof want) == 0, "order %lld %lld %lld %lld %lld %lld", (long long)order[0],
           (long long)order[1], (long long)order[2], (long long)order[3], (long long)order[4], (long long)order[5]);
}

int main(void)
{
    test_worked_example();
    test_sparse_ids();
    test_random_splits();
    printf("test_eval_order: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
