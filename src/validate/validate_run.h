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
    int reference;              /* VALIDATE_REFERENCE_*: the float64 PyTorch reference on each job it models */
} validate_opts_t;

/* --reference: auto runs it on 1 rank where a Python with torch and h5py is
 * found (PYTHON, /usr/bin/python3, python3); on requires it; off skips it. */
enum { VALIDATE_REFERENCE_AUTO = 0, VALIDATE_REFERENCE_ON, VALIDATE_REFERENCE_OFF };
/* the steps it recomputes, and the relative tolerance on each step's loss */
#define VALIDATE_REFERENCE_STEPS 20
#define VALIDATE_REFERENCE_TOL 1e-6

/* Collective; MPI is started. Every curve and bands file is read (fatal,
 * exit 3, on a missing or damaged one) before any job trains. Returns 0
 * PASS, FB_EXIT_VALIDATION FAIL, the same on every rank. */
int validate_run(const validate_opts_t *o);

#endif
