/* The reference jobs of `fabula validate` (docs/validation-format.md "The
 * reference jobs"): each a small training run that exercises one family of
 * features, defined as --set overrides of the built-in default config, with
 * a parallel layout for each world size it runs on. A job's curves are the
 * records of its steps; a run on another world size trains the same
 * micro-batches in another layout, so every layout of a job is compared
 * with every curve of it. */
#ifndef FABULA_VALIDATE_JOBS_H
#define FABULA_VALIDATE_JOBS_H

/* world sizes a job is defined on: 1, 2 and 4 ranks (the 4 micro-batches of
 * a step shared out whole) */
#define VALIDATE_NWORLDS 3

typedef struct validate_job_def {
    const char *name;       /* the curves' directory, and --job's word */
    const char *id;         /* name and version, recorded in each curve: bumped with any change of the job */
    const char *covers;     /* what a PASS of this job proves, for the report */
    long steps;             /* the whole job (its LR schedule spans them whatever --steps says) */
    long quick_steps;       /* the prefix --quick runs */
    const char *sets;       /* the job's own overrides: --set words, space separated */
    const char *layout[VALIDATE_NWORLDS];        /* the layout on 1, 2, 4 ranks: --set words */
    const char *resume_layout[VALIDATE_NWORLDS]; /* NULL: no resume; else the layout after resume_at */
    long resume_at;         /* the first run stops here with a checkpoint, the second resumes it (<= quick_steps,
                             * so that --quick resumes too and is a prefix of the whole job) */
    long eval_interval;     /* a validation pass every this many steps (0: none; needs the corpus) */
    int corpus;             /* 1: a BPE tokenizer and an HDF5 corpus are made first (fabula's own jobs) */
    const char *backend;    /* "cpu" or "cpu16": on --backend cuda, the jobs with gpu 1 run on cuda */
    const char *precision;  /* "fp32", "bf16" or "fp16" */
    int gpu;                /* runs on --backend cuda (16-bit jobs only) */
    int reference;          /* the float64 PyTorch reference models it (fp32, micro-batch aux, no dropout) */
} validate_job_def_t;

/* The suite, in the order it runs. */
extern const validate_job_def_t validate_jobs[];
extern const int validate_njobs;

/* The job named `name`; NULL when there is none. */
const validate_job_def_t *validate_job_find(const char *name);

/* Index of world in 1, 2, 4; -1 for any other. */
int validate_world_index(int world);

/* The --set words of `job` on `world` ranks, as config_load takes them: the
 * common job, the job's own sets, its layout (the resume layout when
 * `second` is 1), and steps / backend / run_dir / the corpus's files (NULL
 * when the job has none). The strings live until validate_sets_free. */
typedef struct validate_sets {
    const char **v;
    int n;
    char *words;            /* the split copies */
    char *owned[10];
} validate_sets_t;

void validate_sets_make(validate_sets_t *s, const validate_job_def_t *job, int world, int second, long steps,
                        const char *backend, const char *run_dir, const char *tokenizer, const char *corpus);
void validate_sets_free(validate_sets_t *s);

/* The layout of `job` on `world` ranks in words ("dp 2, ZeRO 3, ep 2"), a
 * new string; `second`: the resume layout. */
char *validate_layout_text(const validate_job_def_t *job, int world, int second);

#endif
