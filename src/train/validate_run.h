/* `fabula validate` after its options: the reference job trained on this
 * world and its per-step losses compared with the committed curves (or
 * written as one). */
#ifndef FABULA_TRAIN_VALIDATE_RUN_H
#define FABULA_TRAIN_VALIDATE_RUN_H

typedef struct validate_opts {
    long steps;                 /* steps to run and compare (1..VALIDATE_JOB_STEPS) */
    const char *const *curves;  /* --curve words: names in curves_dir or paths (ncurves 0: every curve) */
    int ncurves;
    const char *curves_dir;     /* resolved through data_path_resolve */
    const char *backend;        /* "cpu" or "cuda" */
    const char *run_dir;
    const char *write;          /* write this run's curve here (NULL: not) */
    const char *note;           /* how the ranks are placed, printed with the environment */
} validate_opts_t;

/* Collective; MPI is started. Curves are read (fatal, exit 3, on a missing
 * or damaged one) before the job trains. Returns 0 PASS, FB_EXIT_VALIDATION
 * FAIL or the job's code, the same on every rank. */
int validate_run(const validate_opts_t *o);

#endif
