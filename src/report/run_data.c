/* Loading a run directory for the report. */
#include "report/run_data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "util/error.h"

char *report_path_join(const char *dir, const char *name)
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

/* jobs.jsonl, when the run has one: its JSON-object lines, others warned
 * about and skipped (a line cut short by a killed job, a foreign line). */
static void load_jobs(report_run_t *r, const char *dir)
{
    char *path = report_path_join(dir, "jobs.jsonl");
    FILE *f = NULL;
    char why[1024];
    const int code = access(path, F_OK) == 0 ? regular_file_fopen(path, &f, why, sizeof why) : -1;
    if (code > 0) /* a directory or a FIFO in its place, or unreadable: not a log to skip silently */
        fb_fatal(code, "%s", why);
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    long lineno = 0;
    for (ssize_t len; f && (len = getline(&line, &linecap, f)) >= 0;) {
        lineno++;
        if (len <= 1)
            continue;
        json_error_t err;
        json_t *j = json_loadb(line, (size_t)len, 0, &err);
        if (!j || !json_is_object(j)) {
            fb_warn("%s:%ld: not a job record, skipped", path, lineno);
            json_decref(j);
            continue;
        }
        if (r->njobs == cap) {
            cap = cap ? 2 * cap : 16;
            r->jobs = fb_realloc(r->jobs, cap * sizeof *r->jobs);
        }
        r->jobs[r->njobs++] = j;
    }
    if (f && ferror(f))
        fb_fatal(FB_EXIT_IO, "reading '%s': %s", path, strerror(errno));
    if (f)
        fclose(f);
    free(line);
    free(path);
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* report_run_t.first. A job resumed from the step the last one ended on
 * continues the step count, and its "elapsed" need not fall below the last
 * one's (a short first job, a slow first step), so jobs.jsonl's start
 * lines say where processes begin; the steps and clocks say it for a run
 * without the file. */
static void mark_processes(report_run_t *r)
{
    double *starts = fb_malloc((r->njobs ? r->njobs : 1) * sizeof *starts);
    size_t ns = 0;
    for (size_t i = 0; i < r->njobs; i++) {
        json_t *e = json_object_get(r->jobs[i], "event");
        if (e && json_is_string(e) && !strcmp(json_string_value(e), "start") &&
            report_num(r->jobs[i], "step", &starts[ns]))
            ns++;
    }
    qsort(starts, ns, sizeof *starts, by_value);
    r->first = fb_calloc(r->nsteps, 1);
    for (size_t i = 0; i < r->nsteps; i++) {
        double a = 0, b = 0, ea, eb;
        report_num(r->steps[i], "step", &b);
        if (i > 0)
            report_num(r->steps[i - 1], "step", &a);
        const double after = b - 1;
        r->first[i] = i == 0 || b != a + 1 ||
                      (report_num(r->steps[i - 1], "elapsed", &ea) && report_num(r->steps[i], "elapsed", &eb) &&
                       eb < ea) ||
                      (ns && bsearch(&after, starts, ns, sizeof *starts, by_value));
    }
    free(starts);
}

/* Steps past 2^53 would not survive the double the charts use. */
#define REPORT_MAX_STEP ((json_int_t)1 << 53)

void report_run_load(report_run_t *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        fb_fatal(FB_EXIT_IO, "run directory '%s': %s", dir, errno ? strerror(errno) : "not a directory");
    r->dir = strdup(dir);
    if (!r->dir)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");

    char *cpath = report_path_join(dir, "config.json");
    json_error_t err;
    if (access(cpath, F_OK) == 0) {
        r->config = json_load_file(cpath, 0, &err);
        if (!r->config || !json_is_object(r->config))
            fb_fatal(FB_EXIT_DATA, "%s:%d: not a JSON object: %s", cpath, err.line, err.text);
    }
    free(cpath);

    char *mpath = report_path_join(dir, "metrics.jsonl");
    FILE *f = NULL;
    char why[1024];
    int code = regular_file_fopen(mpath, &f, why, sizeof why);
    if (code == FB_EXIT_IO)
        fb_fatal(FB_EXIT_IO, "cannot read '%s': %s (is '%s' a run directory of `fabula train`?)", mpath,
                 strerror(errno), dir);
    if (code)
        fb_fatal(code, "%s", why);
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    ssize_t len;
    long lineno = 0, skipped = 0;
    json_int_t last_step = 0;
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
        /* fabula writes steps 1, 2, ... in order (a resume trims the log to
         * its checkpoint first): a step that is no count, or that does not
         * follow the one before, is not a record the charts can place */
        const json_t *sj = json_object_get(j, "step");
        const json_int_t step = json_is_integer(sj) ? json_integer_value(sj) : 0;
        if (step < 1 || step > REPORT_MAX_STEP || step <= last_step) {
            if (skipped++ < 5) {
                char reason[128];
                if (!json_is_integer(sj))
                    snprintf(reason, sizeof reason, "is not a whole number");
                else if (step < 1 || step > REPORT_MAX_STEP)
                    snprintf(reason, sizeof reason, "%lld is out of range (1 to 2^53)", (long long)step);
                else
                    snprintf(reason, sizeof reason, "%lld does not follow the step before it, %lld", (long long)step,
                             (long long)last_step);
                fb_warn("%s:%ld: \"step\" %s: the record is skipped", mpath, lineno, reason);
            }
            json_decref(j);
            continue;
        }
        last_step = step;
        push_step(r, j, &cap);
    }
    if (skipped > 5)
        fb_warn("%s: %ld records skipped in all", mpath, skipped);
    if (ferror(f))
        fb_fatal(FB_EXIT_IO, "reading '%s': %s", mpath, strerror(errno));
    fclose(f);
    free(line);
    if (r->nsteps == 0)
        fb_fatal(FB_EXIT_DATA, "%s: no step recorded", mpath);
    free(mpath);
    load_jobs(r, dir);
    mark_processes(r);
}

void report_run_free(report_run_t *r)
{
    for (size_t i = 0; i < r->nsteps; i++)
        json_decref(r->steps[i]);
    free(r->steps);
    for (size_t i = 0; i < r->njobs; i++)
        json_decref(r->jobs[i]);
    free(r->jobs);
    free(r->first);
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

int report_is_warmup(const report_run_t *r, size_t i) { return r->first[i]; }

size_t report_resumes(const report_run_t *r, double **steps)
{
    *steps = fb_malloc((r->nsteps ? r->nsteps : 1) * sizeof **steps);
    size_t n = 0;
    for (size_t i = 1; i < r->nsteps; i++) {
        double s;
        if (r->first[i] && report_num(r->steps[i], "step", &s))
            (*steps)[n++] = s - 1;
    }
    return n;
}

double report_elapsed_total(const report_run_t *r, size_t *processes)
{
    double total = 0, e;
    size_t n = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        n += r->first[i];
        if ((i + 1 == r->nsteps || r->first[i + 1]) && report_num(r->steps[i], "elapsed", &e))
            total += e;
    }
    *processes = n;
    return total;
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

size_t report_series(const report_run_t *r, const char *path, double **x, double **y)
{
    *x = fb_malloc((r->nsteps ? r->nsteps : 1) * sizeof **x);
    *y = fb_malloc((r->nsteps ? r->nsteps : 1) * sizeof **y);
    size_t n = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        double v, s;
        if (report_num(r->steps[i], path, &v) && report_num(r->steps[i], "step", &s)) {
            (*x)[n] = s;
            (*y)[n] = v;
            n++;
        }
    }
    return n;
}

size_t report_sum_measured(const report_run_t *r, const char *path, double *sum, double *wall)
{
    size_t measured = 0, n = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        measured += !report_is_warmup(r, i);
    *sum = *wall = 0;
    for (size_t i = 0; i < r->nsteps; i++) {
        double v, st, ck;
        if ((measured && report_is_warmup(r, i)) || !report_num(r->steps[i], path, &v) ||
            !report_num(r->steps[i], "step_time", &st))
            continue;
        if (!report_num(r->steps[i], "time.checkpoint", &ck))
            ck = 0;
        *sum += v;
        *wall += st + ck;
        n++;
    }
    return n;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void report_ckpts_list(const report_run_t *r, report_ckpts_t *c)
{
    memset(c, 0, sizeof *c);
    json_t *d = r->config ? report_get(r->config, "checkpoint.dir") : NULL;
    c->dir = d && json_is_string(d) && json_string_length(d) ? strdup(json_string_value(d))
                                                             : report_path_join(r->dir, "checkpoints");
    if (!c->dir)
        fb_fatal(FB_EXIT_INTERNAL, "out of memory");
    DIR *dir = opendir(c->dir);
    if (!dir)
        return;
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        const int h5 = len > 3 && !strcmp(e->d_name + len - 3, ".h5");
        const int damaged = len > 8 && !strcmp(e->d_name + len - 8, ".damaged");
        if (strncmp(e->d_name, "step-", 5) != 0 || !(h5 || damaged))
            continue;
        if (c->n == cap) {
            cap = cap ? 2 * cap : 16;
            c->names = fb_realloc(c->names, cap * sizeof *c->names);
        }
        c->names[c->n] = strdup(e->d_name);
        if (!c->names[c->n])
            fb_fatal(FB_EXIT_INTERNAL, "out of memory");
        c->n++;
    }
    closedir(dir);
    if (c->n)
        qsort(c->names, c->n, sizeof *c->names, by_name);
    c->bytes = fb_calloc(c->n ? c->n : 1, sizeof *c->bytes);
    for (size_t i = 0; i < c->n; i++) {
        char *p = report_path_join(c->dir, c->names[i]);
        struct stat st;
        c->bytes[i] = stat(p, &st) == 0 ? (double)st.st_size : NAN;
        free(p);
    }
    char *lp = report_path_join(c->dir, "latest");
    FILE *f = fopen(lp, "r");
    if (f) {
        if (fgets(c->latest, sizeof c->latest, f))
            c->latest[strcspn(c->latest, "\r\n")] = 0;
        fclose(f);
    }
    free(lp);
}

void report_ckpts_free(report_ckpts_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->names[i]);
    free(c->names);
    free(c->bytes);
    free(c->dir);
    memset(c, 0, sizeof *c);
}

const char *report_run_name(const report_run_t *r)
{
    size_t n = strlen(r->dir);
    while (n > 1 && r->dir[n - 1] == '/')
        n--;
    const char *end = r->dir + n, *p = end;
    while (p > r->dir && p[-1] != '/')
        p--;
    static char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(end - p), p);
    return name;
}

double report_memory_bytes(const report_run_t *r)
{
    double best = NAN, v;
    for (size_t i = 0; i < r->nsteps; i++)
        if (report_num(r->steps[i], "ranks.rss_max_bytes", &v) && !(v <= best))
            best = v;
    if (isnan(best))
        for (size_t i = 0; i < r->nsteps; i++)
            if (report_num(r->steps[i], "rss_bytes", &v) && !(v <= best))
                best = v;
    return best;
}
