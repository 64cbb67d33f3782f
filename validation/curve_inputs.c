/* curve_inputs: what the PyTorch reference needs to recompute the first
 * steps of `fabula validate`'s loss curve on its own (validation/
 * check_curve.py): the reference job's initial weights (fabula's
 * initialisation from run.seed), the packed micro-batches of each step (the
 * sampler's and packer's choice, on one rank: the micro-batches do not
 * depend on the layout) and the lr of each update. The losses, gradients
 * and AdamW updates are then the reference's own.
 *
 * usage: curve_inputs JOB OUT.h5 STEPS   (from the source tree: the job
 * reads inputs/sample.jsonl; one rank; a job without a corpus of its own)
 *
 * OUT.h5: /weights/<HF name> float32; root attributes config_json (the
 * job's effective config) and steps; /steps/<s>/lr (float64 scalar) and
 * /steps/<s>/<m>/{tokens,positions,targets,cu_seqlens} (int32) for step s
 * (1-based) and its micro-batch m (0-based, in the step's order). */
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "model/config_resolve.h"
#include "parallel/world.h"
#include "util/error.h"
#include "validate/validate_inputs.h"
#include "validate/validate_jobs.h"

int main(int argc, char **argv)
{
    parallel_init(&argc, &argv);
    if (argc != 4 || parallel_size() != 1)
        fb_fatal(FB_EXIT_USAGE, "usage: curve_inputs JOB OUT.h5 STEPS (one rank, from the source tree)");
    const validate_job_def_t *job = validate_job_find(argv[1]);
    if (!job || job->corpus)
        fb_fatal(FB_EXIT_USAGE, "JOB must be a reference job without a corpus of its own, not '%s'", argv[1]);
    const long steps = atol(argv[3]);
    if (steps < 1 || steps > job->steps)
        fb_fatal(FB_EXIT_USAGE, "STEPS must be 1..%ld", job->steps);

    /* the whole job, as `fabula validate` loads it on one rank (only its
     * first steps are planned here) */
    validate_sets_t sets;
    validate_sets_make(&sets, job, 1, 0, job->steps, job->backend, "runs/validate-unused", NULL, NULL);
    config_t cfg;
    config_load(&cfg, NULL, 0, sets.v, sets.n, 1, 0);
    model_config_resolve(&cfg, 0);

    validate_write_inputs(&cfg, argv[2], steps);
    printf("curve_inputs: wrote %s: %ld steps\n", argv[2], steps);
    config_free(&cfg);
    validate_sets_free(&sets);
    parallel_finalize();
    return 0;
}
