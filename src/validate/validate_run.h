/* `fabula validate` after its options: the suite's jobs trained on this
 * world, every step's record compared with the committed curves of each
 * job (or written as one), the site report. */
#ifndef FABULA_VALIDATE_RUN_H
#define FABULA_VALIDATE_RUN_H

typedef struct validate_opts {
    long steps;                 /* each job runs at most this many steps (0: the whole job) */
    int quick;                  /* each job's quick prefix */
    const char *const *jobs;    /* --job names (njobs 0: the whole suite; on cuda its GPU jobs) */
    int njobs;
    const char *const *curves;  /* --curve names, looked up in each job's directory (ncurves 0: every curve) */
    int ncurves;
    const char *curves_dir;     /* resolved through data_path_resolve */
    const char *backend;        /* "cpu" or "cuda" */
    const char *run_dir;        /* each job trains in run_dir/JOB */
    const char *write;          /* write each job's curve into write/JOB/ (NULL: not) */
    const char *report;         /* where validate.json and validate.md go (NULL: run_dir) */
    const char *note;           /* how the ranks are placed, printed with the environment */
} validate_opts_t;

/* Collective; MPI is started. Every curve and bands file is read (fatal,
 * exit 3, on a missing or damaged one) before any job trains. Returns 0
 * PASS, FB_EXIT_VALIDATION FAIL, the same on every rank. */
int validate_run(const validate_opts_t *o);

#endif
