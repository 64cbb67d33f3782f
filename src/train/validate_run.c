/* train/validate_run.h: the reference job run and compared with the
 * committed loss curves (docs/validation-format.md "Loss curves"). */
#include "train/validate_run.h"

#include <dirent.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "config/config.h"
#include "io/data_path.h"
#include "io/loss_curve.h"
#include "kernels_info.h"
#include "model/config_resolve.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "train/trainer.h"
#include "train/validate.h"
#include "util/error.h"

typedef struct curve_list {
    char **path;
    int n;
} curve_list_t;

static void list_add(curve_list_t *l, char *path)
{
    l->path = fb_realloc(l->path, (size_t)(l->n + 1) * sizeof *l->path);
    l->path[l->n++] = path;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A --curve word: a path when it has a '/' or ends in .json, else a name of dir. */
static char *curve_path(const char *dir, const char *word)
{
    size_t len = strlen(word);
    if (strchr(word, '/') || (len > 5 && !strcmp(word + len - 5, ".json")))
        return fb_strdup(word);
    size_t n = strlen(dir) + len + 8;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s.json", dir, word);
    return p;
}

/* Every *.json of dir, by name; every rank lists it alike. */
static void list_dir(curve_list_t *l, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fb_fatal_all(FB_EXIT_DATA, "no reference curves: cannot open directory %s (run from the source tree, install "
                                   "fabula, or give --curves-dir or --curve)", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json") && e->d_name[0] != '.') {
            size_t n = strlen(dir) + len + 2;
            char *p = fb_malloc(n);
            snprintf(p, n, "%s/%s", dir, e->d_name);
            list_add(l, p);
        }
    }
    closedir(d);
    if (l->n == 0)
        fb_fatal_all(FB_EXIT_DATA, "no reference curves: %s has no *.json file", dir);
    qsort(l->path, (size_t)l->n, sizeof *l->path, by_name);
}

/* What kernels_print_backends says (BLAS, CUDA), indented under "backends". */
static char *backends_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return fb_strdup("  (unknown)\n");
    kernels_print_backends(f);
    fclose(f);
    return buf;
}

/* One line for a curve file's "environment": MPI and HDF5 of the writer. */
static char *environment_line(void)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    size_t n = 64 + strlen(parallel_library_version());
    char *s = fb_malloc(n);
    snprintf(s, n, "%s; HDF5 %u.%u.%u", parallel_library_version(), maj, min, rel);
    for (char *p = s; *p; p++)
        if (*p == '\t')
            *p = ' ';
    return s;
}

static void print_environment(const char *backends, const char *nodes, const char *note)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    printf("environment:\n");
    printf("  fabula  %s\n", PACKAGE_VERSION);
    printf("  MPI     %s\n", parallel_library_version_full());
    printf("  HDF5    %u.%u.%u (parallel)\n", maj, min, rel);
    printf("  backends (BLAS, CUDA):\n%s", backends);
    printf("  ranks   %d x 1 thread (OMP_NUM_THREADS=1: the layout of the curves)\n", parallel_size());
    printf("  nodes   %s\n", nodes);
    if (note)
        printf("  note    %s\n", note);
}

int validate_run(const validate_opts_t *o)
{
    const long steps = o->steps;
    const char *backend = o->backend, *write = o->write, *note = o->note;
    const int rank = parallel_rank(), world = parallel_size();
    const char *precision = strcmp(backend, "cpu") ? "bf16" : "fp32";
    if (VALIDATE_JOB_MICRO_BATCHES % world != 0)
        fb_fatal_all(FB_EXIT_USAGE, "the reference job runs on 1, 2 or 4 ranks (its %d micro-batches per step are "
                                    "shared out whole), not on %d", VALIDATE_JOB_MICRO_BATCHES, world);

    /* The curves first: a missing or damaged one is reported before minutes
     * of training. Every rank reads them, so every rank fails alike. */
    char *dir = data_path_resolve(o->curves_dir);
    curve_list_t paths = {0};
    if (o->ncurves > 0)
        for (int i = 0; i < o->ncurves; i++)
            list_add(&paths, curve_path(dir, o->curves[i]));
    else if (!write)
        list_dir(&paths, dir);
    loss_curve_t *curves = fb_calloc((size_t)paths.n + 1, sizeof *curves);
    for (int i = 0; i < paths.n; i++) {
        char err[1024];
        if (loss_curve_read(paths.path[i], &curves[i], err, sizeof err) != 0)
            fb_fatal_all(FB_EXIT_DATA, "%s", err);
        if (strcmp(curves[i].job, VALIDATE_JOB_NAME) != 0)
            fb_fatal_all(FB_EXIT_DATA, "loss curve %s is of job \"%s\", not of this fabula's reference job \"%s\"",
                         paths.path[i], curves[i].job, VALIDATE_JOB_NAME);
        if (curves[i].steps < steps)
            fb_fatal_all(FB_EXIT_DATA, "loss curve %s has %ld steps, fewer than the %ld to compare (--steps)",
                         paths.path[i], curves[i].steps, steps);
    }

    validate_job_t job;
    validate_job_make(&job, steps, backend, o->run_dir);
    config_t cfg;
    config_load(&cfg, NULL, 0, job.sets, job.nsets, world, rank == 0);
    model_config_resolve(&cfg, rank == 0);
    if (rank == 0) {
        printf("fabula validate: reference job %s, %ld of %d steps on %d rank%s, backend %s (%s)\n",
               VALIDATE_JOB_NAME, steps, VALIDATE_JOB_STEPS, world, world == 1 ? "" : "s", backend, precision);
        fflush(stdout);
    }
    /* One thread per rank: OpenBLAS splits a matmul by its thread count,
     * which changes the rounding, so the layout of a bit-exact comparison
     * is ranks x 1 thread. The tiny model gains nothing from more. */
    if (setenv("OMP_NUM_THREADS", "1", 1) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "setenv OMP_NUM_THREADS failed");
    double *losses = fb_calloc((size_t)steps, sizeof *losses);
    int code = trainer_run_losses(&cfg, losses);
    char *nodes = parallel_node_list();
    char *backends = backends_text();
    char *blas = validate_blas_line(backends);

    if (code == FB_EXIT_OK && rank == 0) {
        if (write) {
            loss_curve_t out = {0};
            char name[64], err[1024];
            snprintf(name, sizeof name, "%s-np%d", backend, world);
            out.name = name;
            out.job = (char *)VALIDATE_JOB_NAME;
            out.backend = (char *)backend;
            out.precision = (char *)precision;
            out.world_size = world;
            out.fabula_version = (char *)PACKAGE_VERSION;
            out.environment = environment_line();
            out.blas = blas;
            out.steps = steps;
            out.loss = losses;
            if (loss_curve_write(write, &out, err, sizeof err) != 0)
                fb_fatal(FB_EXIT_IO, "%s", err);
            printf("fabula validate: wrote %s (%ld steps)\n", write, steps);
            free(out.environment);
        }
        printf("\n");
        print_environment(backends, nodes, note);
        if (paths.n > 0) {
            int all = 1;
            printf("\n%-10s %-22s %6s %12s %11s %10s  %s\n", "curve", "layout", "steps", "max |diff|", "worst step",
                   "tolerance", "verdict");
            for (int i = 0; i < paths.n; i++) {
                const loss_curve_t *c = &curves[i];
                validate_result_t r = validate_compare(losses, steps, c, backend, precision, world, blas);
                char layout[64], worst[32], tol[32];
                snprintf(layout, sizeof layout, "%s %s, %d rank%s", c->backend, c->precision, c->world_size,
                         c->world_size == 1 ? "" : "s");
                if (r.worst_step)
                    snprintf(worst, sizeof worst, "%ld", r.worst_step);
                else
                    snprintf(worst, sizeof worst, "-");
                if (r.tolerance == 0.0)
                    snprintf(tol, sizeof tol, "bit-exact");
                else
                    snprintf(tol, sizeof tol, "%g", r.tolerance);
                printf("%-10s %-22s %6ld %12.3e %11s %10s  %s\n", c->name, layout, r.steps, r.max_diff, worst, tol,
                       r.pass ? "PASS" : "FAIL");
                if (!r.pass) {
                    all = 0;
                    printf("  %s: worst step %ld: loss %.17g, curve %.17g (%s)\n", c->name, r.worst_step,
                           losses[r.worst_step - 1], c->loss[r.worst_step - 1], r.rule);
                }
            }
            printf("\nfabula validate: %s\n", all ? "PASS" : "FAIL");
            if (!all)
                code = FB_EXIT_VALIDATION;
        }
        fflush(stdout);
    }
    /* the verdict is rank 0's: every rank exits with it */
    comm_bcast(comm_world(), &code, sizeof code, 0);

    free(backends);
    free(blas);
    free(nodes);
    free(losses);
    config_free(&cfg);
    validate_job_free(&job);
    for (int i = 0; i < paths.n; i++) {
        loss_curve_free(&curves[i]);
        free(paths.path[i]);
    }
    free(curves);
    free(paths.path);
    free(dir);
    return code;
}
