/* The verdict of `fabula validate` for a site's records
 * (docs/validation-format.md "The report"): per job and curve, every
 * quantity's largest difference, worst step, tolerance and PASS/FAIL; on
 * the console, and as validate.json and validate.md. */
#ifndef FABULA_VALIDATE_REPORT_H
#define FABULA_VALIDATE_REPORT_H

#include "io/curve_bands.h"
#include "io/loss_curve.h"
#include "validate/validate_compare.h"
#include "validate/validate_env.h"
#include "validate/validate_jobs.h"

typedef struct validate_outcome {
    const validate_job_def_t *job;
    long steps;             /* run and compared */
    char *layout;           /* this run's layout in words, and the resume's */
    double seconds;         /* the job's wall time, corpus included */
    int code;               /* the training's exit code (0: it ran) */
    int ncurves;
    loss_curve_t *curves;   /* [ncurves] the job's curves compared */
    validate_result_t *results; /* [ncurves] */
    curve_bands_t bands;
    /* the float64 PyTorch reference on this run's first steps */
    int ref_ran;            /* 1: recomputed; 0: not (ref_why says why) */
    long ref_steps;
    double ref_worst;       /* the largest relative difference of a step's loss */
    double ref_tol;
    int ref_pass;
    int ref_failed;         /* it did not finish: the job fails */
    char ref_why[256];      /* why not run, or the reference's version */
    int pass;               /* ran, and every curve (and the reference, where run) passed */
} validate_outcome_t;

/* One job's block on the console: what it covers, a row per quantity with a
 * cell per curve, and each failing quantity's worst step. */
void validate_report_job(const validate_outcome_t *o);
/* The closing table and the verdict line. */
void validate_report_summary(const validate_outcome_t *o, int n, int pass);
/* dir/validate.json and dir/validate.md (rank 0; atomic writes). */
void validate_report_write(const char *dir, const validate_outcome_t *o, int n, const validate_env_t *env,
                           const char *backend, int quick, int pass);

void validate_outcome_free(validate_outcome_t *o);

#endif
