#include "tboard/tb_csv.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/append_file.h"
#include "util/error.h"

/* Files kept open between steps; tags past this many (a large MoE's
 * per-expert counts) are opened, appended to and closed at each write, so
 * the process stays well inside its descriptor limit. */
#define CSV_MAX_OPEN 128

typedef struct csv_file {
    char *tag;
    fb_append_t *f;     /* NULL: not kept open */
} csv_file_t;

struct tb_csv {
    char *dir;
    csv_file_t *slots;  /* open-addressing table by tag, cap a power of two */
    size_t n, cap, open;
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void tb_csv_file_name(const char *tag, char *buf, size_t n)
{
    snprintf(buf, n, "%s.csv", tag);
    for (char *p = buf; *p; p++)
        if (*p == '/' || *p == ' ')
            *p = '_';
}

static char *file_path(const tb_csv_t *c, const char *tag)
{
    size_t n = strlen(c->dir) + strlen(tag) + 8;
    char *name = fb_malloc(n), *path = fb_malloc(n + 1);
    tb_csv_file_name(tag, name, n);
    snprintf(path, n + 1, "%s/%s", c->dir, name);
    free(name);
    return path;
}

/* Truncates `path` before its first row of a step >= first_step. */
static void trim_file(const char *path, long first_step)
{
    /* a FIFO in a CSV file's place would block the open */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        fb_fatal(FB_EXIT_DATA, "%s: not a regular file", path);
    FILE *f = fopen(path, "r+e");
    if (!f)
        fb_fatal(FB_EXIT_IO, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long pos = 0, cut = -1;
    int header = 1;
    while ((got = getline(&line, &cap, f)) > 0) {
        /* the header, then rows "step,value"; a torn last line goes too */
        if (!header && (line[got - 1] != '\n' || strtol(line, NULL, 10) >= first_step)) {
            cut = pos;
            break;
        }
        header = 0;
        pos += (long)got;
    }
    free(line);
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "%s: read: %s", path, strerror(errno));
    if (cut >= 0 && ftruncate(fileno(f), (off_t)cut) != 0)
        fb_fatal(FB_EXIT_IO, "%s: truncate: %s", path, strerror(errno));
    if (fclose(f) != 0)
        fb_fatal(FB_EXIT_IO, "%s: close: %s", path, strerror(errno));
}

tb_csv_t *tb_csv_open(const char *dir, long first_step)
{
    tb_csv_t *c = fb_calloc(1, sizeof *c);
    c->dir = fb_strdup(dir);
    c->cap = 64;
    c->slots = fb_calloc(c->cap, sizeof *c->slots);
    {
        DIR *d = opendir(dir);
        if (!d)
            fb_fatal(FB_EXIT_IO, "%s: %s", dir, strerror(errno));
        const struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 4, ".csv") != 0)
                continue;
            size_t pn = strlen(dir) + n + 2;
            char *path = fb_malloc(pn);
            snprintf(path, pn, "%s/%s", dir, e->d_name);
            trim_file(path, first_step);
            free(path);
        }
        closedir(d);
    }
    return c;
}

static csv_file_t *slot_of(tb_csv_t *c, const char *tag)
{
    if (2 * (c->n + 1) > c->cap) {
        csv_file_t *old = c->slots;
        size_t oldcap = c->cap;
        c->cap *= 2;
        c->slots = fb_calloc(c->cap, sizeof *c->slots);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].tag) {
                size_t j = hash(old[i].tag) & (c->cap - 1);
                while (c->slots[j].tag)
                    j = (j + 1) & (c->cap - 1);
                c->slots[j] = old[i];
            }
        free(old);
    }
    size_t j = hash(tag) & (c->cap - 1);
    while (c->slots[j].tag && strcmp(c->slots[j].tag, tag) != 0)
        j = (j + 1) & (c->cap - 1);
    return &c->slots[j];
}

void tb_csv_scalar(tb_csv_t *c, const char *tag, long step, const json_t *leaf, double value)
{
    csv_file_t *s = slot_of(c, tag);
    const int known = s->tag != NULL;
    fb_append_t *f = s->f;
    if (!f) {
        char *path = file_path(c, tag);
        f = fb_append_open(path);
        free(path);
        /* a new file (or one an earlier process created and never filled) */
        if (fb_append_size(f) == 0) {
            size_t hn = strlen("step,\n") + strlen(tag);
            char *head = fb_malloc(hn + 1);
            snprintf(head, hn + 1, "step,%s\n", tag);
            fb_append_record(f, head, hn);
            free(head);
        }
        if (!known) {
            s->tag = fb_strdup(tag);
            c->n++;
            if (c->open < CSV_MAX_OPEN) {
                s->f = f;
                c->open++;
            }
        }
    }
    char row[96];
    int w = json_is_integer(leaf) ? snprintf(row, sizeof row, "%ld,%lld\n", step, (long long)json_integer_value(leaf))
                                  : snprintf(row, sizeof row, "%ld,%.9g\n", step, value);
    FB_ASSERT(w > 0 && (size_t)w < sizeof row);
    /* one row per write: a full disk leaves whole rows behind */
    fb_append_record(f, row, (size_t)w);
    if (f != s->f)
        fb_append_close(f);
}

void tb_csv_close(tb_csv_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++) {
        fb_append_close(c->slots[i].f);
        free(c->slots[i].tag);
    }
    free(c->slots);
    free(c->dir);
    free(c);
}
