/* validate/validate_run.h: the suite's jobs run and compared with the
 * committed curves (docs/validation-format.md "Loss curves"). */
#include "validate/validate_run.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "corpus/prep.h"
#include "corpus/tokenizer_job.h"
#include "io/atomic_file.h"
#include "io/curve_bands.h"
#include "io/data_path.h"
#include "io/loss_curve.h"
#include "model/config_resolve.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/timer.h"
#include "validate/validate_compare.h"
#include "validate/validate_env.h"
#include "validate/validate_inputs.h"
#include "validate/validate_jobs.h"
#include "validate/validate_report.h"

/* The corpus job's inputs: a BPE tokenizer of this many tokens trained on
 * the bundled sample, and windows of the job's length with a quarter of the
 * novels held out for the validation loss. */
#define CORPUS_VOCAB 512
#define CORPUS_SEQ 64
#define CORPUS_OVERLAP 16
#define CORPUS_MIN_SEQ 16
#define CORPUS_VALID_FRACTION 0.25
#define CORPUS_SEED 7

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The curve files of a job's directory (*.json but bands.json), by name; 0
 * when the directory does not exist. Every rank lists it alike. */
static int list_curves(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    *out = NULL;
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json") && e->d_name[0] != '.' &&
            strcmp(e->d_name, "bands.json") != 0) {
            *out = fb_realloc(*out, (size_t)(n + 1) * sizeof **out);
            (*out)[n++] = path_join(dir, e->d_name);
        }
    }
    closedir(d);
    qsort(*out, (size_t)n, sizeof **out, by_name);
    return n;
}

/* The steps this run gives `job`. */
static long job_steps(const validate_job_def_t *job, const validate_opts_t *o)
{
    long s = o->quick ? job->quick_steps : job->steps;
    return o->steps > 0 && o->steps < s ? o->steps : s;
}

/* Reads every curve of `job` (and its bands) that this run compares with:
 * fatal, on every rank alike, when one is missing, damaged, of another job
 * or shorter than the run. */
static void load_curves(validate_outcome_t *out, const validate_job_def_t *job, const char *dir_all,
                        const validate_opts_t *o)
{
    char *dir = path_join(dir_all, job->name);
    char **paths = NULL;
    int n = 0;
    if (o->ncurves > 0) {
        paths = fb_calloc((size_t)o->ncurves, sizeof *paths);
        for (int i = 0; i < o->ncurves; i++) {
            size_t len = strlen(dir) + strlen(o->curves[i]) + 8;
            paths[n] = fb_malloc(len);
            snprintf(paths[n++], len, "%s/%s.json", dir, o->curves[i]);
        }
    } else {
        n = list_curves(dir, &paths);
        if (n == 0 && !o->write)
            fb_fatal_all(FB_EXIT_DATA, "no reference curves of job %s: %s has no curve file (run from the source "
                                       "tree, install fabula, or give --curves-dir)", job->name, dir);
    }
    out->curves = fb_calloc((size_t)n + 1, sizeof *out->curves);
    out->results = fb_calloc((size_t)n + 1, sizeof *out->results);
    out->ncurves = n;
    const long steps = job_steps(job, o);
    char err[1024];
    for (int i = 0; i < n; i++) {
        loss_curve_t *c = &out->curves[i];
        if (loss_curve_read(paths[i], c, err, sizeof err) != 0)
            fb_fatal_all(FB_EXIT_DATA, "%s", err);
        if (strcmp(c->job, job->id) != 0)
            fb_fatal_all(FB_EXIT_DATA, "loss curve %s is of job \"%s\", not of this fabula's job \"%s\"", paths[i],
                         c->job, job->id);
        if (c->steps < steps)
            fb_fatal_all(FB_EXIT_DATA, "loss curve %s has %ld steps, fewer than the %ld to compare", paths[i],
                         c->steps, steps);
        free(paths[i]);
    }
    free(paths);
    if (n > 0) {
        char *bp = path_join(dir, "bands.json");
        if (curve_bands_read(bp, &out->bands, err, sizeof err) != 0)
            fb_fatal_all(FB_EXIT_DATA, "%s (each job's curves come with the bands derived from them: "
                                       "validation/derive_bands.py)", err);
        if (strcmp(out->bands.job, job->id) != 0)
            fb_fatal_all(FB_EXIT_DATA, "bands file %s is of job \"%s\", not \"%s\"", bp, out->bands.job, job->id);
        if (out->bands.steps < steps)
            fb_fatal_all(FB_EXIT_DATA, "bands file %s has bands for %ld steps, fewer than the %ld to compare", bp,
                         out->bands.steps, steps);
        free(bp);
    }
    free(dir);
}

/* One step's record into the curve (allocated at the first, for `steps`). */
static void record_step(loss_curve_t *c, long steps, const step_record_t *r)
{
    if (c->steps == 0) {
        const int E = r->moe ? r->moe->E : 0, L = E > 0 ? r->moe->L : 0;
        loss_curve_alloc(c, steps, L, E);
    }
    const long i = r->step - 1;
    FB_ASSERT(i >= 0 && i < c->steps);
    const double v[CURVE_NREAL] = {r->loss, r->lm_loss, r->aux_loss,   r->z_loss,
                                   r->grad_norm, r->lr, r->loss_scale, r->valid_lm_loss};
    /* a curve holds no infinity (JSON has none): the gradient norm of an
     * fp16 step skipped on overflow is recorded as "no finite value" */
    for (int q = 0; q < CURVE_NREAL; q++)
        c->real[q][i] = isfinite(v[q]) ? v[q] : NAN;
    c->dropped[i] = r->dropped;
    const size_t per = (size_t)c->moe_layers * (size_t)c->experts;
    for (size_t k = 0; k < per; k++)
        c->tokens_per_expert[(size_t)i * per + k] = r->moe->expert_tokens[k];
}

/* One training run of `job` to `steps` (the second half of a resume job
 * when `second`), every step recorded into c. Returns the trainer's code. */
static int train_phase(const validate_job_def_t *job, int second, long steps, long total, const char *backend,
                       const char *run_dir, const char *tokenizer, const char *corpus, loss_curve_t *c)
{
    const int rank = parallel_rank(), world = parallel_size();
    validate_sets_t s;
    validate_sets_make(&s, job, world, second, steps, backend, run_dir, tokenizer, corpus);
    config_t cfg;
    config_load(&cfg, NULL, 0, s.v, s.n, world, rank == 0);
    model_config_resolve(&cfg, rank == 0);
    trainer_t *tr = trainer_open(&cfg);
    step_record_t rec;
    while (trainer_step(tr, &rec))
        record_step(c, total, &rec);
    const int code = trainer_close(tr);
    config_free(&cfg);
    validate_sets_free(&s);
    return code;
}

/* fabula's own tokenizer and prep jobs on the bundled sample, into dir. */
static void make_corpus(const char *dir, char **tokenizer, char **corpus)
{
    char *sample = data_path_resolve("inputs/sample.jsonl");
    const char *inputs[1] = {sample};
    if (parallel_rank() == 0)
        fs_mkdirs(dir);
    comm_barrier(comm_world());
    *tokenizer = path_join(dir, "tokenizer.json");
    *corpus = path_join(dir, "corpus.h5");
    const tokenizer_job_t tj = {.inputs = inputs, .ninputs = 1, .output = *tokenizer, .vocab_size = CORPUS_VOCAB,
                                .min_frequency = 2, .force = 1};
    int code = tokenizer_job_run(&tj);
    if (code != FB_EXIT_OK)
        fb_fatal_all(code, "the corpus job's tokenizer could not be trained");
    const prep_options_t po = {.inputs = inputs, .ninputs = 1, .tokenizer = *tokenizer, .output = *corpus,
                               .max_seq_len = CORPUS_SEQ, .overlap = CORPUS_OVERLAP, .min_seq_len = CORPUS_MIN_SEQ,
                               .unit = PREP_UNIT_WINDOWS, .valid_fraction = CORPUS_VALID_FRACTION,
                               .seed = CORPUS_SEED, .strict = 1, .force = 1, .quiet = 1};
    code = prep_run(&po);
    if (code != FB_EXIT_OK)
        fb_fatal_all(code, "the corpus job's corpus could not be prepared");
    free(sample);
}

/* A Python that imports torch and h5py (PYTHON first), or NULL. */
static const char *find_reference_python(void)
{
    const char *cands[3] = {getenv("PYTHON"), "/usr/bin/python3", "python3"};
    for (int i = 0; i < 3; i++) {
        if (!cands[i] || !cands[i][0] || strchr(cands[i], '\''))
            continue;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, h5py' >/dev/null 2>&1", cands[i]);
        if (system(cmd) == 0)
            return cands[i];
    }
    return NULL;
}

/* validation/check_curve.py (with reference_model.py beside it), from the
 * working directory or the installed copy. */
static int reference_script_found(void)
{
    char *p = data_path_resolve("validation/check_curve.py");
    const int ok = access(p, R_OK) == 0;
    free(p);
    return ok;
}

/* The float64 PyTorch reference (validation/check_curve.py) recomputes the
 * first steps of this 1-rank run from its own inputs (validate_inputs.h),
 * into out->ref_*; rank 0 is the world. */
static void run_reference(validate_outcome_t *out, const validate_job_def_t *job, const validate_opts_t *o,
                          const char *python, loss_curve_t *run, const char *tokenizer, const char *corpus)
{
    const long steps = out->steps < VALIDATE_REFERENCE_STEPS ? out->steps : VALIDATE_REFERENCE_STEPS;
    char *jdir = path_join(o->run_dir, job->name);
    char *dir = path_join(jdir, "reference");
    fs_mkdirs(dir);
    char *inputs = path_join(dir, "inputs.h5"), *curve = path_join(dir, "run.json"), *log = path_join(dir, "check.txt");
    char *script = data_path_resolve("validation/check_curve.py");
    validate_sets_t s;
    validate_sets_make(&s, job, 1, 0, job->steps, job->backend, dir, tokenizer, corpus);
    config_t cfg;
    config_load(&cfg, NULL, 0, s.v, s.n, 1, 0);
    model_config_resolve(&cfg, 0);
    validate_write_inputs(&cfg, inputs, steps);
    config_free(&cfg);
    validate_sets_free(&s);
    char err[1024];
    loss_curve_t c = *run;
    c.name = (char *)"run";
    c.job = (char *)job->id;
    c.layout = out->layout;
    c.backend = (char *)job->backend;
    c.precision = (char *)job->precision;
    c.world_size = 1;
    c.blas = c.fabula_version = c.environment = (char *)"";
    if (loss_curve_write(curve, &c, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_IO, "%s", err);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' --tol %g >'%s' 2>&1", python, script, inputs, curve,
             VALIDATE_REFERENCE_TOL, log);
    const int rc = system(cmd);
    FILE *f = fopen(log, "r");
    char line[1024];
    double worst = NAN;
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "check_curve: worst relative difference %lf", &worst);
    if (f)
        fclose(f);
    if (isnan(worst) || (rc != 0 && WEXITSTATUS(rc) != 1)) {
        out->ref_ran = 0;
        snprintf(out->ref_why, sizeof out->ref_why, "validation/check_curve.py did not finish (exit status %d): %s",
                 rc, log);
        out->ref_failed = 1;
    } else {
        out->ref_ran = 1;
        out->ref_steps = steps;
        out->ref_worst = worst;
        out->ref_tol = VALIDATE_REFERENCE_TOL;
        out->ref_pass = worst <= VALIDATE_REFERENCE_TOL && rc == 0;
        snprintf(out->ref_why, sizeof out->ref_why, "validation/check_curve.py with %s", python);
    }
    free(script);
    free(log);
    free(curve);
    free(inputs);
    free(dir);
    free(jdir);
}

/* Runs `job` on this world: the corpus first where it has one, then one
 * training run, or two around a checkpoint; the records in *run. */
static int run_job(validate_outcome_t *out, const validate_job_def_t *job, const validate_opts_t *o,
                   const char *python, loss_curve_t *run, double *seconds)
{
    const double t0 = timer_now();
    const long steps = job_steps(job, o);
    char *dir = path_join(o->run_dir, job->name);
    char *trun = path_join(dir, "run");
    char *tokenizer = NULL, *corpus = NULL;
    if (job->corpus) {
        char *data = path_join(dir, "data");
        make_corpus(data, &tokenizer, &corpus);
        free(data);
    }
    const char *backend = strcmp(o->backend, "cpu") ? o->backend : job->backend;
    const int resume = job->resume_layout[validate_world_index(parallel_size())] && steps > job->resume_at;
    int code = train_phase(job, 0, resume ? job->resume_at : steps, steps, backend, trun, tokenizer, corpus, run);
    if (code == FB_EXIT_OK && resume)
        code = train_phase(job, 1, steps, steps, backend, trun, tokenizer, corpus, run);
    /* a shorter run's last step has a validation pass the curve's step has
     * not (a run always measures at its end): not compared */
    if (code == FB_EXIT_OK && job->eval_interval > 0 && steps < job->steps && steps % job->eval_interval != 0 &&
        !(resume == 0 && steps == job->resume_at))
        run->real[CURVE_VALID_LM_LOSS][steps - 1] = NAN;
    if (code == FB_EXIT_OK && job->reference) {
        if (o->reference == VALIDATE_REFERENCE_OFF)
            snprintf(out->ref_why, sizeof out->ref_why, "--reference off");
        else if (parallel_size() > 1)
            snprintf(out->ref_why, sizeof out->ref_why, "it runs on 1 rank: the micro-batches and initial weights "
                                                        "do not depend on the layout, the 1-rank curve is checked");
        else if (!python)
            snprintf(out->ref_why, sizeof out->ref_why, "no Python with torch and h5py: PYTHON, /usr/bin/python3, "
                                                        "python3");
        else if (!reference_script_found())
            snprintf(out->ref_why, sizeof out->ref_why, "no validation/check_curve.py here or in %s", FB_PKGDATADIR);
        else
            run_reference(out, job, o, python, run, tokenizer, corpus);
    }
    free(tokenizer);
    free(corpus);
    free(trun);
    free(dir);
    *seconds = timer_now() - t0;
    return code;
}

/* The jobs this run takes, in the suite's order. */
static int select_jobs(const validate_opts_t *o, const validate_job_def_t **sel)
{
    const int gpu = strcmp(o->backend, "cpu") != 0;
    for (int i = 0; i < o->njobs; i++) {
        const validate_job_def_t *j = validate_job_find(o->jobs[i]);
        if (!j) {
            char names[512] = "";
            for (int k = 0; k < validate_njobs; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                         validate_jobs[k].name);
            fb_fatal_all(FB_EXIT_USAGE, "--job %s: no such job (the suite: %s)", o->jobs[i], names);
        }
        if (gpu && !j->gpu)
            fb_fatal_all(FB_EXIT_USAGE, "--job %s: a job of the CPU backend (on --backend %s the 16-bit jobs run: "
                                        "bf16, fp16)", j->name, o->backend);
    }
    int n = 0;
    for (int k = 0; k < validate_njobs; k++) {
        const validate_job_def_t *j = &validate_jobs[k];
        int take = o->njobs == 0 ? (!gpu || j->gpu) : 0;
        for (int i = 0; i < o->njobs; i++)
            take |= !strcmp(o->jobs[i], j->name);
        if (take)
            sel[n++] = j;
    }
    return n;
}

static void write_curve(const validate_opts_t *o, const validate_job_def_t *job, loss_curve_t *run,
                        const validate_env_t *env, const char *layout)
{
    char name[64], err[1024];
    snprintf(name, sizeof name, "%s-np%d", run->backend, env->world);
    char *dir = path_join(o->write, job->name);
    fs_mkdirs(dir);
    size_t len = strlen(dir) + strlen(name) + 8;
    char *path = fb_malloc(len);
    snprintf(path, len, "%s/%s.json", dir, name);
    run->name = fb_strdup(name);
    run->job = fb_strdup(job->id);
    run->layout = fb_strdup(layout);
    run->blas = fb_strdup(env->blas);
    run->fabula_version = fb_strdup(env->fabula);
    run->environment = fb_strdup(env->short_line);
    if (loss_curve_write(path, run, err, sizeof err) != 0)
        fb_fatal(FB_EXIT_IO, "%s", err);
    printf("  wrote %s (%ld steps)\n", path, run->steps);
    free(path);
    free(dir);
}

int validate_run(const validate_opts_t *o)
{
    const int rank = parallel_rank(), world = parallel_size();
    if (validate_world_index(world) < 0)
        fb_fatal_all(FB_EXIT_USAGE, "the reference jobs run on 1, 2 or 4 ranks (their 4 micro-batches per step are "
                                    "shared out whole), not on %d", world);
    const validate_job_def_t *sel[64];
    const int n = select_jobs(o, sel);
    if (n == 0)
        fb_fatal_all(FB_EXIT_USAGE, "no job to run");

    /* The curves first: a missing or damaged one is reported before minutes
     * of training. Every rank reads them, so every rank fails alike. */
    char *dir = data_path_resolve(o->curves_dir);
    validate_outcome_t *out = fb_calloc((size_t)n, sizeof *out);
    for (int i = 0; i < n; i++) {
        out[i].job = sel[i];
        out[i].steps = job_steps(sel[i], o);
        load_curves(&out[i], sel[i], dir, o);
    }
    const char *python = NULL;
    if (o->reference != VALIDATE_REFERENCE_OFF && world == 1) {
        python = find_reference_python();
        if (!python && o->reference == VALIDATE_REFERENCE_ON)
            fb_fatal_all(FB_EXIT_USAGE, "--reference on: no Python with torch and h5py (tried PYTHON, "
                                        "/usr/bin/python3, python3)");
    }
    if (o->reference == VALIDATE_REFERENCE_ON && world > 1)
        fb_fatal_all(FB_EXIT_USAGE, "--reference on: the float64 reference runs on 1 rank (the inputs do not "
                                    "depend on the layout), not on %d", world);
    /* One thread per rank: OpenBLAS splits a matmul by its thread count,
     * which changes the rounding, so the layout of a bit-exact comparison
     * is ranks x 1 thread. The tiny models gain nothing from more. */
    if (setenv("OMP_NUM_THREADS", "1", 1) != 0)
        fb_fatal(FB_EXIT_INTERNAL, "setenv OMP_NUM_THREADS failed");
    validate_env_t env;
    validate_env_make(&env, o->note);
    if (rank == 0) {
        printf("fabula validate: %d job%s%s on %d rank%s, backend %s\n", n, n == 1 ? "" : "s",
               o->quick ? " (--quick: each job's first steps)" : "", world, world == 1 ? "" : "s", o->backend);
        fflush(stdout);
    }
    int all = 1;
    for (int i = 0; i < n; i++) {
        const validate_job_def_t *job = sel[i];
        validate_outcome_t *r = &out[i];
        char *l1 = validate_layout_text(job, world, 0);
        if (job->resume_layout[validate_world_index(world)] && r->steps > job->resume_at) {
            char *l2 = validate_layout_text(job, world, 1);
            size_t len = strlen(l1) + strlen(l2) + 64;
            r->layout = fb_malloc(len);
            snprintf(r->layout, len, "%s; from step %ld: %s", l1, job->resume_at + 1, l2 + strcspn(l2, ",") + 2);
            free(l2);
            free(l1);
        } else {
            r->layout = l1;
        }
        if (rank == 0) {
            printf("\n== job %s: %ld steps on %s ==\n", job->name, r->steps, r->layout);
            fflush(stdout);
        }
        loss_curve_t run = {0};
        r->code = run_job(r, job, o, python, &run, &r->seconds);
        const char *backend = strcmp(o->backend, "cpu") ? o->backend : job->backend;
        run.backend = fb_strdup(backend);
        run.precision = fb_strdup(job->precision);
        run.world_size = world;
        r->pass = r->code == FB_EXIT_OK;
        if (r->code == FB_EXIT_OK)
            for (int c = 0; c < r->ncurves; c++) {
                r->results[c] = validate_compare(&run, r->steps, &r->curves[c], &r->bands, env.blas);
                r->pass &= r->results[c].pass;
            }
        if (r->ref_ran)
            r->pass &= r->ref_pass;
        if (r->ref_failed)
            r->pass = 0;
        all &= r->pass;
        if (rank == 0) {
            validate_report_job(r);
            if (o->write && r->code == FB_EXIT_OK)
                write_curve(o, job, &run, &env, r->layout);
            fflush(stdout);
        }
        loss_curve_free(&run);
    }
    int code = all ? FB_EXIT_OK : FB_EXIT_VALIDATION;
    if (rank == 0) {
        printf("\n");
        validate_env_print(&env);
        validate_report_summary(out, n, all);
        const char *rdir = o->report ? o->report : o->run_dir;
        fs_mkdirs(rdir);
        validate_report_write(rdir, out, n, &env, o->backend, o->quick, all);
        printf("fabula validate: wrote %s/validate.json and %s/validate.md\n", rdir, rdir);
        fflush(stdout);
    }
    /* the verdict is rank 0's: every rank exits with it */
    comm_bcast(comm_world(), &code, sizeof code, 0);
    for (int i = 0; i < n; i++)
        validate_outcome_free(&out[i]);
    free(out);
    validate_env_free(&env);
    free(dir);
    return code;
}
