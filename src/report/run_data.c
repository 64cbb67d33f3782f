/* Loading a run directory for the report. */
#include "report/run_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void push_step(report_run_t *r, json_t *j, size_t *cap)
{
    if (r->nsteps == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        json_t **s = realloc(r->steps, *cap * sizeof *s);
        if (!s)
            fb_fatal(FB_EXIT_INTERNAL, "out of memory");
        r->steps = s;
    }
    r->steps[r->nsteps++] = j;
}

void report_run_load(report_run_t *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        fb_fatal(FB_EXIT_IO, "run directory '%s': %s", dir, errno ? strerror(errno) : "not a directory");
    r->dir = strdup(dir);
    if (!r->dir)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");

    char *cpath = path_join(dir, "config.json");
    json_error_t err;
    if (access(cpath, F_OK) == 0) {
        r->config = json_load_file(cpath, 0, &err);
        if (!r->config || !json_is_object(r->config))
            fb_fatal(FB_EXIT_DATA, "%s:%d: not a JSON object: %s", cpath, err.line, err.text);
    }
    free(cpath);

    char *mpath = path_join(dir, "metrics.jsonl");
    FILE *f = fopen(mpath, "r");
    if (!f)
        fb_fatal(FB_EXIT_IO, "cannot read '%s': %s (is '%s' a run directory of `fabula train`?)", mpath,
                 strerror(errno), dir);
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &linecap, f)) >= 0) {
        lineno++;
        const int complete = len > 0 && line[len - 1] == '\n';
        if (len == 0 || (len == 1 && complete))
            continue;
        json_t *j = json_loadb(line, (size_t)len, 0, &err);
        if (!j || !json_is_object(j) || !json_is_number(json_object_get(j, "step"))) {
            /* the last line of a run killed while writing it */
            if (!complete) {
                fb_warn("%s:%ld: an unfinished last line, skipped", mpath, lineno);
                json_decref(j);
                break;
            }
            fb_fatal(FB_EXIT_DATA, "%s:%ld: not a metrics record (a JSON object with a \"step\"): %s", mpath,
                     lineno, j ? "no numeric step" : err.text);
        }
        push_step(r, j, &cap);
    }
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "reading '%s': %s", mpath, strerror(errno));
    fclose(f);
    free(line);
    if (r->nsteps == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no step recorded", mpath);
    free(mpath);
}

void report_run_free(report_run_t *r)
{
    for (size_t i = 0; i < r->nsteps; i++)
        json_decref(r->steps[i]);
    free(r->steps);
    json_decref(r->config);
    free(r->dir);
    memset(r, 0, sizeof *r);
}

json_t *report_get(json_t *obj, const char *path)
{
    char key[128];
    const char *p = path;
    while (obj && json_is_object(obj)) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = 0;
        obj = json_object_get(obj, key);
        if (!dot)
            return obj;
        p = dot + 1;
    }
    return NULL;
}

int report_num(json_t *obj, const char *path, double *out)
{
    json_t *v = report_get(obj, path);
    if (!v || !json_is_number(v))
        return 0;
    *out = json_number_value(v);
    return 1;
}

int report_world(const report_run_t *r)
{
    double w;
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "ranks.world", &w) && w >= 1)
            return (int)w;
    double tbs, micro, gas;
    if (r->config && report_num(r->config, "train_batch_size", &tbs) &&
        report_num(r->config, "train_micro_batch_size_per_gpu", &micro) &&
        report_num(r->config, "gradient_accumulation_steps", &gas) && micro > 0 && gas > 0)
        return (int)(tbs / (micro * gas) + 0.5);
    return 0;
}

int report_is_warmup(const report_run_t *r, size_t i)
{
    if (i == 0)
        return 1;
    double a = 0, b = 0;
    report_num(r->steps[i - 1], "step", &a);
    report_num(r->steps[i], "step", &b);
    return b != a + 1;
}

double report_tokens_per_s(const report_run_t *r, size_t *nsteps)
{
    size_t measured = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        measured += !report_is_warmup(r, i);
    double tokens = 0, secs = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        double t, s;
        if ((measured && report_is_warmup(r, i)) || !report_num(r->steps[i], "tokens", &t) ||
            !report_num(r->steps[i], "step_time", &s))
            continue;
        tokens += t;
        secs += s;
        n++;
    }
    if (nsteps)
        *nsteps = n;
    return secs > 0 ? tokens / secs : 0;
}
