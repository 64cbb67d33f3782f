/* Run directory: config.json (atomic) and metrics.jsonl (line-appended). */
#include "io/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "util/error.h"

struct metrics {
    FILE *f;
    char *path;
};

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void rundir_prepare(const char *dir, const char *effective_json)
{
    fs_mkdirs(dir);
    char *path = join_path(dir, "config.json");
    size_t n = strlen(effective_json);
    /* end the file with a newline, as text files should */
    if (n == 0 || effective_json[n - 1] != '\n') {
        char *text = fb_malloc(n + 1);
        memcpy(text, effective_json, n);
        text[n] = '\n';
        atomic_write_file(path, text, n + 1);
        free(text);
    } else {
        atomic_write_file(path, effective_json, n);
    }
    free(path);
}

metrics_t *metrics_open(const char *dir)
{
    metrics_t *m = fb_calloc(1, sizeof *m);
    m->path = join_path(dir, "metrics.jsonl");
    m->f = fopen(m->path, "ae");
    if (!m->f)
        fb_fatal(FB_EXIT_IO, "%s: cannot open for appending: %s", m->path, strerror(errno));
    if (setvbuf(m->f, NULL, _IOLBF, 0) != 0)
        fb_fatal(FB_EXIT_IO, "%s: setvbuf: %s", m->path, strerror(errno));
    return m;
}

void metrics_write(metrics_t *m, json_t *record)
{
    FB_ASSERT(m && record);
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9);
    size_t n = json_dumpb(record, NULL, 0, flags);
    if (n == 0)
        fb_fatal(FB_EXIT_INTERNAL, "%s: cannot serialise a metrics record", m->path);
    /* one fwrite per line, so a concurrent reader sees whole lines */
    char *line = fb_malloc(n + 1);
    size_t written = json_dumpb(record, line, n, flags);
    FB_ASSERT(written == n);
    line[n] = '\n';
    errno = 0;
    if (fwrite(line, 1, n + 1, m->f) != n + 1 || fflush(m->f) != 0)
        fb_fatal(FB_EXIT_IO, "%s: write: %s", m->path, strerror(errno ? errno : EIO));
    free(line);
}

void metrics_close(metrics_t *m)
{
    if (!m)
        return;
    if (fclose(m->f) != 0)
        fb_fatal(FB_EXIT_IO, "%s: close: %s", m->path, strerror(errno));
    free(m->path);
    free(m);
}
