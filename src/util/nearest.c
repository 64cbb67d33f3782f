#include "util/nearest.h"

#include <string.h>

size_t nearest_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 255 || m > 255)
        return (size_t)-1;
    /* rows i-2, i-1 and i of the table: 3 x 256 on the stack */
    size_t d[3][256];
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = d[i % 3], *prev = d[(i - 1) % 3], *prev2 = d[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
    }
    return d[n % 3][m];
}

size_t nearest_close_enough(const char *word)
{
    size_t k = strlen(word) / 4;
    return k < 1 ? 1 : k > 3 ? 3 : k;
}

const char *nearest_name(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = nearest_close_enough(word) + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = nearest_distance(word, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}
