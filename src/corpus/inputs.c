#include "corpus/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "io/regular_file.h"
#include "util/error.h"

static const char *extension_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    return dot && (!slash || dot > slash) ? dot : "";
}

static int is_document_path(const char *path) { return strcasecmp(extension_of(path), ".json") == 0; }

static int is_input_name(const char *name)
{
    const char *ext = extension_of(name);
    return name[0] != '.' && (strcasecmp(ext, ".json") == 0 || strcasecmp(ext, ".jsonl") == 0 ||
                              strcasecmp(ext, ".ndjson") == 0);
}

static void files_add(corpus_inputs_t *in, int *cap, const char *path, int64_t size)
{
    if (in->n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        in->files = fb_realloc(in->files, (size_t)*cap * sizeof *in->files);
    }
    corpus_input_file_t *f = &in->files[in->n++];
    f->path = fb_strdup(path);
    f->size = size;
    f->start = in->total;
    f->is_document = is_document_path(path);
    in->total += size;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void directory_add(corpus_inputs_t *in, int *cap, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fb_fatal_all(FB_EXIT_IO, "cannot open input directory %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, ncap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (!is_input_name(e->d_name))
            continue;
        if (n == ncap) {
            ncap = ncap ? 2 * ncap : 16;
            names = fb_realloc(names, ncap * sizeof *names);
        }
        names[n++] = fb_strdup(e->d_name);
    }
    if (errno)
        fb_fatal_all(FB_EXIT_IO, "cannot read input directory %s: %s", dir, strerror(errno));
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    size_t dlen = strlen(dir);
    int slash = dlen > 0 && dir[dlen - 1] == '/';
    int added = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = fb_malloc(dlen + strlen(names[i]) + 2);
        sprintf(path, "%s%s%s", dir, slash ? "" : "/", names[i]);
        struct stat st;
        if (stat(path, &st) != 0)
            fb_fatal_all(FB_EXIT_IO, "cannot open input %s: %s", path, strerror(errno));
        if (S_ISREG(st.st_mode)) {
            files_add(in, cap, path, (int64_t)st.st_size);
            added++;
        }
        free(path);
        free(names[i]);
    }
    free(names);
    if (added == 0)
        fb_fatal_all(FB_EXIT_DATA, "input directory %s holds no input file (.json, .jsonl or .ndjson)", dir);
}

void corpus_inputs_list(corpus_inputs_t *in, const char *const *paths, int npaths)
{
    memset(in, 0, sizeof *in);
    if (npaths == 0)
        fb_fatal_all(FB_EXIT_USAGE, "no input given (files or directories of .json/.jsonl novels)");
    int cap = 0;
    for (int i = 0; i < npaths; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0)
            fb_fatal_all(FB_EXIT_IO, "cannot open input %s: %s", paths[i], strerror(errno));
        char why[1024];
        int code = S_ISDIR(st.st_mode) ? 0 : regular_file_check(paths[i], why, sizeof why);
        if (code) /* a FIFO would block its reader, a device never end */
            fb_fatal_all(code, "%s", why);
        if (S_ISDIR(st.st_mode))
            directory_add(in, &cap, paths[i]);
        else
            files_add(in, &cap, paths[i], (int64_t)st.st_size);
    }
}

void corpus_inputs_free(corpus_inputs_t *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->files[i].path);
    free(in->files);
    memset(in, 0, sizeof *in);
}

void corpus_inputs_share(const corpus_inputs_t *in, int rank, int nranks, int64_t *begin, int64_t *end)
{
    /* floor(T * r / P) without overflowing T * r. */
    int64_t q = in->total / nranks, rem = in->total % nranks;
    *begin = q * rank + rem * rank / nranks;
    *end = rank == nranks - 1 ? in->total + 1 : q * (rank + 1) + rem * (rank + 1) / nranks;
}
