#include "loader/fit_tree.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h" /* fb_hash2: priorities that depend on the index alone */
#include "util/error.h"

void fit_tree_reset(fit_tree_t *t, int n)
{
    FB_ASSERT(n >= 0);
    if (n > t->cap || !t->left) {
        size_t m = (size_t)(n > 16 ? n : 16);
        t->left = fb_realloc(t->left, m * sizeof *t->left);
        t->right = fb_realloc(t->right, m * sizeof *t->right);
        t->room = fb_realloc(t->room, m * sizeof *t->room);
        t->prio = fb_realloc(t->prio, m * sizeof *t->prio);
        t->cap = (int)m;
    }
    t->root = -1;
}

static int key_less(const fit_tree_t *t, int a, int b)
{
    return t->room[a] < t->room[b] || (t->room[a] == t->room[b] && a < b);
}

/* Splits subtree `s` into keys below node i's key (*lo) and the rest (*hi). */
static void split(fit_tree_t *t, int s, int i, int *lo, int *hi)
{
    if (s < 0) {
        *lo = *hi = -1;
        return;
    }
    if (key_less(t, s, i)) {
        split(t, t->right[s], i, &t->right[s], hi);
        *lo = s;
    } else {
        split(t, t->left[s], i, lo, &t->left[s]);
        *hi = s;
    }
}

/* Joins two subtrees, every key of a below every key of b. */
static int join(fit_tree_t *t, int a, int b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (t->prio[a] > t->prio[b]) {
        t->right[a] = join(t, t->right[a], b);
        return a;
    }
    t->left[b] = join(t, a, t->left[b]);
    return b;
}

static int insert_at(fit_tree_t *t, int s, int i)
{
    if (s < 0)
        return i;
    if (t->prio[i] > t->prio[s]) {
        split(t, s, i, &t->left[i], &t->right[i]);
        return i;
    }
    if (key_less(t, i, s))
        t->left[s] = insert_at(t, t->left[s], i);
    else
        t->right[s] = insert_at(t, t->right[s], i);
    return s;
}

void fit_tree_insert(fit_tree_t *t, int i, int64_t room)
{
    FB_ASSERT(i >= 0 && i < t->cap);
    t->room[i] = room;
    t->prio[i] = fb_hash2(0x66697474726565ULL, (uint64_t)i);
    t->left[i] = t->right[i] = -1;
    t->root = insert_at(t, t->root, i);
}

static int remove_at(fit_tree_t *t, int s, int i)
{
    FB_ASSERT(s >= 0);
    if (s == i)
        return join(t, t->left[s], t->right[s]);
    if (key_less(t, i, s))
        t->left[s] = remove_at(t, t->left[s], i);
    else
        t->right[s] = remove_at(t, t->right[s], i);
    return s;
}

void fit_tree_remove(fit_tree_t *t, int i) { t->root = remove_at(t, t->root, i); }

int fit_tree_best(const fit_tree_t *t, int64_t need)
{
    int best = -1;
    for (int s = t->root; s >= 0;) {
        if (t->room[s] >= need) {
            best = s; /* everything to the right is a worse fit */
            s = t->left[s];
        } else {
            s = t->right[s];
        }
    }
    return best;
}

void fit_tree_free(fit_tree_t *t)
{
    free(t->left);
    free(t->right);
    free(t->room);
    free(t->prio);
    memset(t, 0, sizeof *t);
}
