#include "validate/validate_report.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "util/error.h"
#include "util/strbuf.h"

/* A quantity's cell: "equal", "-" (not compared), "diff <= tol", or for
 * the counts the first step they differ at. */
static void cell(char *buf, size_t n, int q, const validate_qresult_t *x)
{
    if (!x->compared)
        snprintf(buf, n, "-");
    else if (x->worst_step == 0)
        snprintf(buf, n, "equal");
    else if (q >= CURVE_NREAL)
        snprintf(buf, n, "differ from step %ld%s", x->worst_step, x->pass ? "" : " FAIL");
    else if (x->tolerance == 0.0)
        snprintf(buf, n, "%.2e%s", x->max_diff, x->pass ? "" : " FAIL");
    else
        snprintf(buf, n, "%.2e %s %.1e%s", x->max_diff, x->pass ? "<=" : ">", x->tolerance, x->pass ? "" : " FAIL");
}

static const char *rule_word(const validate_result_t *r)
{
    return r->exact ? "bit-exact" : strstr(r->rule, "another backend") ? "backend" : "bands";
}

void validate_report_job(const validate_outcome_t *o)
{
    const validate_job_def_t *j = o->job;
    printf("\njob %s (%s): %ld step%s on %s; %.1f s: %s\n", j->name, j->id, o->steps, o->steps == 1 ? "" : "s",
           o->layout, o->seconds, o->code ? "did not finish" : o->pass ? "PASS" : "FAIL");
    printf("  covers: %s\n", j->covers);
    if (o->code || o->ncurves == 0)
        return;
    printf("  %-18s", "quantity");
    for (int c = 0; c < o->ncurves; c++) {
        char h[96];
        snprintf(h, sizeof h, "%s (%s)", o->curves[c].name, rule_word(&o->results[c]));
        printf(" %-26s", h);
    }
    printf("\n");
    for (int q = 0; q < VALIDATE_NQ; q++) {
        printf("  %-18s", validate_quantity_name(q));
        for (int c = 0; c < o->ncurves; c++) {
            char b[96];
            cell(b, sizeof b, q, &o->results[c].q[q]);
            printf(" %-26s", b);
        }
        printf("\n");
    }
    for (int c = 0; c < o->ncurves; c++) {
        const validate_result_t *r = &o->results[c];
        if (r->routing_flip > VALIDATE_MIN_SAME_ROUTING)
            printf("  %s: routing differs from step %ld (a near-tie of router logits rounded the other way: two "
                   "trainings from there on); steps 1-%ld compared\n",
                   o->curves[c].name, r->routing_flip, r->compared);
        else if (r->routing_flip > 0)
            printf("  FAIL %s: routing differs from step %ld, within the first %d steps, which must route alike\n",
                   o->curves[c].name, r->routing_flip, VALIDATE_MIN_SAME_ROUTING);
    }
    for (int c = 0; c < o->ncurves; c++)
        for (int q = 0; q < VALIDATE_NQ; q++) {
            const validate_qresult_t *x = &o->results[c].q[q];
            if (x->pass)
                continue;
            printf("  FAIL %s %s: outside its tolerance from step %ld; worst step %ld: this run %.17g, curve "
                   "%.17g (%s)\n", o->curves[c].name, validate_quantity_name(q), x->first_out, x->worst_step,
                   x->run_value, x->curve_value, o->results[c].rule);
        }
    if (o->ncurves > 0 && !o->results[0].exact)
        printf("  bands: %s\n", o->bands.derivation);
    if (o->ncurves > 0)
        printf("  curves checked: %s\n", o->bands.checked);
    if (o->ref_ran)
        printf("  reference: this run's first %ld losses recomputed by the float64 PyTorch reference (%s): worst "
               "relative difference %.2e %s %g: %s\n",
               o->ref_steps, o->ref_why, o->ref_worst, o->ref_pass ? "<=" : ">", o->ref_tol,
               o->ref_pass ? "PASS" : "FAIL");
    else if (o->job->reference)
        printf("  reference: not run (%s)\n", o->ref_why);
}

/* The (curve, quantity) of o that left its tolerance first; 0 when none. */
static int first_fail(const validate_outcome_t *o, int *c_out, int *q_out)
{
    long best = 0;
    for (int c = 0; c < o->ncurves; c++)
        for (int q = 0; q < VALIDATE_NQ; q++) {
            const validate_qresult_t *x = &o->results[c].q[q];
            long at = x->first_out ? x->first_out : x->worst_step;
            if (!x->pass && (best == 0 || at < best)) {
                best = at;
                *c_out = c;
                *q_out = q;
            }
        }
    return best > 0;
}

void validate_report_summary(const validate_outcome_t *o, int n, int pass)
{
    printf("\n%-16s %6s  %-52s %6s  %s\n", "job", "steps", "layout", "curves", "verdict");
    for (int i = 0; i < n; i++) {
        int c, q;
        char why[256] = "";
        if (o[i].code)
            snprintf(why, sizeof why, " (the training ended with exit %d)", o[i].code);
        else {
            size_t k = 0;
            if (first_fail(&o[i], &c, &q))
                k += (size_t)snprintf(why, sizeof why, " (%s against %s from step %ld", validate_quantity_name(q),
                                      o[i].curves[c].name,
                                      o[i].results[c].q[q].first_out ? o[i].results[c].q[q].first_out
                                                                     : o[i].results[c].q[q].worst_step);
            if (o[i].ref_ran && !o[i].ref_pass && k < sizeof why)
                k += (size_t)snprintf(why + k, sizeof why - k, "%sthe float64 reference: %.2e relative", k ? "; " : " (",
                                      o[i].ref_worst);
            else if (o[i].ref_failed && k < sizeof why)
                k += (size_t)snprintf(why + k, sizeof why - k, "%sthe float64 reference did not finish", k ? "; " : " (");
            if (k > 0 && k < sizeof why)
                snprintf(why + k, sizeof why - k, ")");
        }
        printf("%-16s %6ld  %-52s %6d  %s%s\n", o[i].job->name, o[i].steps, o[i].layout, o[i].ncurves,
               o[i].pass ? "PASS" : "FAIL", why);
    }
    printf("\nfabula validate: %s\n", pass ? "PASS" : "FAIL");
}

/* A number for JSON: null when not finite. */
static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *job_json(const validate_outcome_t *o)
{
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(o->job->name));
    json_object_set_new(j, "id", json_string(o->job->id));
    json_object_set_new(j, "covers", json_string(o->job->covers));
    json_object_set_new(j, "steps", json_integer(o->steps));
    json_object_set_new(j, "layout", json_string(o->layout));
    json_object_set_new(j, "seconds", json_real(o->seconds));
    json_object_set_new(j, "exit_code", json_integer(o->code));
    json_object_set_new(j, "verdict", json_string(o->pass ? "PASS" : "FAIL"));
    if (o->bands.derivation) {
        json_object_set_new(j, "bands_derivation", json_string(o->bands.derivation));
        json_object_set_new(j, "curves_checked", json_string(o->bands.checked));
    }
    if (o->job->reference) {
        json_t *r = json_object();
        json_object_set_new(r, "ran", json_boolean(o->ref_ran));
        if (o->ref_ran) {
            json_object_set_new(r, "steps", json_integer(o->ref_steps));
            json_object_set_new(r, "worst_relative_difference", num(o->ref_worst));
            json_object_set_new(r, "tolerance", json_real(o->ref_tol));
            json_object_set_new(r, "reference", json_string(o->ref_why));
            json_object_set_new(r, "verdict", json_string(o->ref_pass ? "PASS" : "FAIL"));
        } else {
            json_object_set_new(r, "why_not", json_string(o->ref_why));
        }
        json_object_set_new(j, "reference", r);
    }
    json_t *cs = json_array();
    for (int c = 0; c < o->ncurves; c++) {
        const validate_result_t *r = &o->results[c];
        json_t *cj = json_object(), *qs = json_object();
        json_object_set_new(cj, "curve", json_string(o->curves[c].name));
        json_object_set_new(cj, "curve_layout", json_string(o->curves[c].layout));
        json_object_set_new(cj, "rule", json_string(r->rule));
        json_object_set_new(cj, "steps_compared", json_integer(r->compared));
        json_object_set_new(cj, "routing_differs_from_step", json_integer(r->routing_flip));
        json_object_set_new(cj, "verdict", json_string(r->pass ? "PASS" : "FAIL"));
        for (int q = 0; q < VALIDATE_NQ; q++) {
            const validate_qresult_t *x = &r->q[q];
            json_t *qj = json_object();
            json_object_set_new(qj, "compared", json_boolean(x->compared));
            json_object_set_new(qj, "max_diff", num(x->max_diff));
            json_object_set_new(qj, "worst_step", json_integer(x->worst_step));
            json_object_set_new(qj, "first_step_out", json_integer(x->first_out));
            json_object_set_new(qj, "tolerance", json_real(x->tolerance));
            if (x->worst_step) {
                json_object_set_new(qj, "run", num(x->run_value));
                json_object_set_new(qj, "curve", num(x->curve_value));
            }
            json_object_set_new(qj, "verdict", json_string(x->pass ? "PASS" : "FAIL"));
            json_object_set_new(qs, validate_quantity_name(q), qj);
        }
        json_object_set_new(cj, "quantities", qs);
        json_array_append_new(cs, cj);
    }
    json_object_set_new(j, "curves", cs);
    return j;
}

static void write_json(const char *path, const validate_outcome_t *o, int n, const validate_env_t *env,
                       const char *backend, int quick, int pass)
{
    json_t *root = json_object(), *e = json_object(), *jobs = json_array();
    json_object_set_new(root, "format", json_string("fabula-validate-report"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "verdict", json_string(pass ? "PASS" : "FAIL"));
    json_object_set_new(root, "backend", json_string(backend));
    json_object_set_new(root, "quick", json_boolean(quick));
    json_object_set_new(e, "fabula", json_string(env->fabula));
    json_object_set_new(e, "mpi", json_string(env->mpi));
    json_object_set_new(e, "hdf5", json_string(env->hdf5));
    json_object_set_new(e, "blas", json_string(env->blas));
    json_object_set_new(e, "backends", json_string(env->backends));
    json_object_set_new(e, "ranks", json_integer(env->world));
    json_object_set_new(e, "nodes", json_string(env->nodes));
    if (env->note)
        json_object_set_new(e, "note", json_string(env->note));
    json_object_set_new(root, "environment", e);
    for (int i = 0; i < n; i++)
        json_array_append_new(jobs, job_json(&o[i]));
    json_object_set_new(root, "jobs", jobs);
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!s)
        fb_fatal(FB_EXIT_INTERNAL, "cannot encode %s (a string not valid UTF-8?)", path);
    size_t len = strlen(s);
    s = fb_realloc(s, len + 2);
    s[len] = '\n';
    atomic_write_file(path, s, len + 1);
    free(s);
}

static void write_markdown(const char *path, const validate_outcome_t *o, int n, const validate_env_t *env,
                           const char *backend, int quick, int pass)
{
    strbuf_t b = {0};
    sb_printf(&b, "# fabula validate: %s\n\n", pass ? "PASS" : "FAIL");
    sb_printf(&b, "%d job(s)%s, backend %s, %d rank(s) x 1 thread.\n\n", n, quick ? " (--quick)" : "", backend,
              env->world);
    sb_printf(&b, "| environment | |\n|---|---|\n| fabula | %s |\n| MPI | %s |\n| HDF5 | %s |\n| BLAS | %s |\n"
                  "| nodes | %s |\n",
              env->fabula, env->mpi, env->hdf5, env->blas, env->nodes);
    if (env->note)
        sb_printf(&b, "| note | %s |\n", env->note);
    sb_printf(&b, "\n| job | steps | layout | seconds | verdict |\n|---|---:|---|---:|---|\n");
    for (int i = 0; i < n; i++)
        sb_printf(&b, "| %s | %ld | %s | %.1f | %s |\n", o[i].job->name, o[i].steps, o[i].layout, o[i].seconds,
                  o[i].code ? "FAIL (did not finish)" : o[i].pass ? "PASS" : "FAIL");
    for (int i = 0; i < n; i++) {
        sb_printf(&b, "\n## %s (%s): %s\n\n%s.\n\n", o[i].job->name, o[i].job->id, o[i].pass ? "PASS" : "FAIL",
                  o[i].job->covers);
        if (o[i].code) {
            sb_printf(&b, "The training ended with exit %d.\n", o[i].code);
            continue;
        }
        sb_printf(&b, "| quantity |");
        for (int c = 0; c < o[i].ncurves; c++)
            sb_printf(&b, " %s (%s) |", o[i].curves[c].name, rule_word(&o[i].results[c]));
        sb_printf(&b, "\n|---|");
        for (int c = 0; c < o[i].ncurves; c++)
            sb_printf(&b, "---|");
        sb_printf(&b, "\n");
        for (int q = 0; q < VALIDATE_NQ; q++) {
            sb_printf(&b, "| %s |", validate_quantity_name(q));
            for (int c = 0; c < o[i].ncurves; c++) {
                char cl[96];
                cell(cl, sizeof cl, q, &o[i].results[c].q[q]);
                const validate_qresult_t *x = &o[i].results[c].q[q];
                if (x->worst_step)
                    sb_printf(&b, " %s (step %ld) |", cl, x->worst_step);
                else
                    sb_printf(&b, " %s |", cl);
            }
            sb_printf(&b, "\n");
        }
        if (o[i].bands.derivation)
            sb_printf(&b, "\nBands: %s\n\nCurves checked: %s\n", o[i].bands.derivation, o[i].bands.checked);
        if (o[i].ref_ran)
            sb_printf(&b, "\nReference: this run's first %ld losses recomputed by the float64 PyTorch reference "
                          "(%s): worst relative difference %.2e (tolerance %g): %s\n",
                      o[i].ref_steps, o[i].ref_why, o[i].ref_worst, o[i].ref_tol, o[i].ref_pass ? "PASS" : "FAIL");
        else if (o[i].job->reference)
            sb_printf(&b, "\nReference: not run (%s)\n", o[i].ref_why);
        for (int c = 0; c < o[i].ncurves; c++)
            if (o[i].results[c].routing_flip > 0)
                sb_printf(&b, "\n%s: routing differs from step %ld; steps 1-%ld compared%s\n", o[i].curves[c].name,
                          o[i].results[c].routing_flip, o[i].results[c].compared,
                          o[i].results[c].routing_flip > VALIDATE_MIN_SAME_ROUTING ? "" : " (FAIL: within the first "
                                                                                           "steps)");
    }
    atomic_write_file(path, b.s, b.n);
    sb_free(&b);
}

void validate_report_write(const char *dir, const validate_outcome_t *o, int n, const validate_env_t *env,
                           const char *backend, int quick, int pass)
{
    size_t len = strlen(dir) + 32;
    char *p = fb_malloc(len);
    snprintf(p, len, "%s/validate.json", dir);
    write_json(p, o, n, env, backend, quick, pass);
    snprintf(p, len, "%s/validate.md", dir);
    write_markdown(p, o, n, env, backend, quick, pass);
    free(p);
}

void validate_outcome_free(validate_outcome_t *o)
{
    free(o->layout);
    for (int c = 0; c < o->ncurves; c++)
        loss_curve_free(&o->curves[c]);
    free(o->curves);
    free(o->results);
    curve_bands_free(&o->bands);
    memset(o, 0, sizeof *o);
}
