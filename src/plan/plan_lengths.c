/* plan/plan_lengths.h: the sample lengths the planner runs the step plan on. */
#include "plan/plan_lengths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/chapter_lengths.h"
#include "corpus/novels.h"
#include "corpus/windows.h"
#include "io/regular_file.h"
#include "util/error.h"

/* One length a line; blank lines and '#' comments skipped. */
static int64_t read_lengths_file(const char *path, int max_seq_len, int64_t **out, int64_t *cut)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot open lengths file %s: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "lengths file %s", why);
    int64_t n = 0, cap = 1024;
    int64_t *lens = fb_malloc((size_t)cap * sizeof *lens);
    char line[256];
    long lineno = 0;
    *cut = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line + strspn(line, " \t\r\n");
        if (!*p || *p == '#')
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        end += strspn(end, " \t\r\n");
        if (errno || end == p || (*end && *end != '#') || v < 1)
            fb_fatal(FB_EXIT_DATA, "%s:%ld: expected a sample length (an integer >= 1)", path, lineno);
        if (v > max_seq_len) {
            v = max_seq_len;
            (*cut)++;
        }
        if (n == cap) {
            cap *= 2;
            lens = fb_realloc(lens, (size_t)cap * sizeof *lens);
        }
        lens[n++] = v;
    }
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "cannot read lengths file %s: %s", path, strerror(errno));
    fclose(f);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no sample length", path);
    *out = lens;
    return n;
}

int64_t plan_lengths_read(const char *jsonl, const char *lengths_file, const char *split, int max_seq_len,
                          int64_t **lens, int64_t *cut)
{
    if (lengths_file)
        return read_lengths_file(lengths_file, max_seq_len, lens, cut);

    novel_set_t novels;
    novels_load(&novels, jsonl);
    int64_t n;
    if (strcmp(split, "chapters") == 0) {
        n = chapter_lengths_get(&novels, max_seq_len, lens, cut);
    } else {
        sample_set_t set;
        windows_build(&set, &novels, max_seq_len, 0, 2);
        n = set.n;
        *lens = fb_malloc((size_t)n * sizeof **lens);
        for (int64_t i = 0; i < n; i++)
            (*lens)[i] = sample_set_len(&set, i);
        *cut = 0;
        sample_set_free(&set);
    }
    novels_free(&novels);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no sample of at least 2 tokens", jsonl);
    return n;
}

int64_t plan_lengths_of_corpus(const corpus_t *c, int max_seq_len, int64_t **lens, int64_t *cut)
{
    int64_t n = corpus_num_samples(c);
    if (n == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no training sample", corpus_path(c));
    *lens = fb_malloc((size_t)n * sizeof **lens);
    *cut = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = corpus_sample_len(c, i);
        if (len > max_seq_len) {
            len = max_seq_len;
            (*cut)++;
        }
        (*lens)[i] = len;
    }
    return n;
}
