#include "corpus/input_list.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/error.h"

static void add(input_list_t *l, const char *path, size_t size)
{
    l->path = fb_realloc(l->path, (size_t)(l->n + 1) * sizeof *l->path);
    l->size = fb_realloc(l->size, (size_t)(l->n + 1) * sizeof *l->size);
    l->path[l->n] = fb_strdup(path);
    l->size[l->n] = size;
    l->n++;
}

static int is_input_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot &&
           (!strcasecmp(dot, ".json") || !strcasecmp(dot, ".jsonl") || !strcasecmp(dot, ".ndjson"));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void add_dir(input_list_t *l, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fb_fatal(FB_EXIT_IO, "cannot read input directory %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_input_name(e->d_name)) {
            names = fb_realloc(names, (n + 1) * sizeof *names);
            names[n++] = fb_strdup(e->d_name);
        }
    closedir(d);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "input directory %s holds no input file (*.json, *.jsonl, *.ndjson)", dir);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + 1 + strlen(names[i]) + 1;
        char *p = fb_malloc(len);
        snprintf(p, len, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(p, &st) != 0)
            fb_fatal(FB_EXIT_IO, "cannot open input %s: %s", p, strerror(errno));
        if (S_ISREG(st.st_mode))
            add(l, p, (size_t)st.st_size);
        free(p);
        free(names[i]);
    }
    free(names);
}

void input_list_collect(input_list_t *l, const char *const *paths, int npaths)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < npaths; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0)
            fb_fatal(FB_EXIT_IO, "cannot open input %s: %s", paths[i], strerror(errno));
        if (S_ISDIR(st.st_mode))
            add_dir(l, paths[i]);
        else
            add(l, paths[i], (size_t)st.st_size);
    }
}

void input_list_free(input_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->path[i]);
    free(l->path);
    free(l->size);
    memset(l, 0, sizeof *l);
}

typedef struct sized {
    size_t size;
    int idx;
} sized_t;

/* Largest first; equal sizes in list order, so the assignment is the same everywhere. */
static int cmp_sized(const void *a, const void *b)
{
    const sized_t *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void input_list_assign(const input_list_t *l, int nranks, int *owner)
{
    sized_t *order = fb_malloc((size_t)(l->n ? l->n : 1) * sizeof *order);
    for (int i = 0; i < l->n; i++)
        order[i] = (sized_t){l->size[i], i};
    qsort(order, (size_t)l->n, sizeof *order, cmp_sized);
    size_t *load = fb_calloc((size_t)nranks, sizeof *load);
    for (int k = 0; k < l->n; k++) {
        int best = 0;
        for (int r = 1; r < nranks; r++)
            if (load[r] < load[best])
                best = r;
        owner[order[k].idx] = best;
        load[best] += order[k].size;
    }
    free(load);
    free(order);
}
