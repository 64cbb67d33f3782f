#include "corpus/chapter_lengths.h"

#include <stdlib.h>

#include "util/error.h"

/* Writes the sample length of each chapter of `text` to out[] (when not
 * NULL) and returns how many; a chapter ends at a run of >= 3 newlines. */
static int64_t walk(const uint8_t *text, size_t len, int max_seq_len, int64_t *out, int64_t *cut)
{
    int64_t n = 0;
    size_t i = 0;
    while (i < len) {
        size_t begin = i, end = len, next = len;
        for (size_t j = i; j < len; j++) {
            if (text[j] != '\n')
                continue;
            size_t k = j;
            while (k < len && text[k] == '\n')
                k++;
            if (k - j >= 3) {
                end = j;
                next = k;
                break;
            }
            j = k - 1;
        }
        int64_t tokens = 1 + (int64_t)(end - begin); /* genre token + bytes */
        if (end > begin) {
            if (tokens > max_seq_len) {
                tokens = max_seq_len;
                if (cut)
                    (*cut)++;
            }
            if (out)
                out[n] = tokens;
            n++;
        }
        i = next;
    }
    return n;
}

int64_t chapter_lengths_get(const novel_set_t *set, int max_seq_len, int64_t **lens, int64_t *cut)
{
    FB_ASSERT(max_seq_len >= 2);
    int64_t n = 0;
    for (int v = 0; v < set->n; v++)
        n += walk(set->novels[v].content, set->novels[v].len, max_seq_len, NULL, NULL);
    *lens = fb_malloc((size_t)(n > 0 ? n : 1) * sizeof **lens);
    if (cut)
        *cut = 0;
    int64_t at = 0;
    for (int v = 0; v < set->n; v++)
        at += walk(set->novels[v].content, set->novels[v].len, max_seq_len, *lens + at, cut);
    FB_ASSERT(at == n);
    return n;
}
