/* run.preempt_signals: the signals a batch system's warning may arrive as.
 * Some MPI and NCCL stacks keep SIGUSR1 for themselves (MPICH's hydra, or a
 * site's checkpoint library), so a job script can move the warning to
 * SIGUSR2 (`sbatch --signal=B:USR2@120`) and take SIGUSR1 off the list, which
 * leaves that signal to whoever installed a handler for it (docs/batch.md). */
#include <signal.h>
#include <string.h>

#include "config/config_internal.h"

static const struct {
    const char *name;
    int sig;
} known[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},
    {"INT", SIGINT},   {"HUP", SIGHUP},   {"XCPU", SIGXCPU},
};

/* distinct names only are kept, so the array has room for every one */
_Static_assert(sizeof known / sizeof *known <= RUN_MAX_PREEMPT_SIGNALS, "room for every preemption signal");

#define EXPECTED                                                                                                \
    "an array of signal names out of \"USR1\", \"USR2\", \"TERM\", \"INT\", \"HUP\", \"XCPU\" (a \"SIG\" prefix " \
    "allowed)"

static int signal_by_name(const char *name)
{
    if (!strncmp(name, "SIG", 3))
        name += 3;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(name, known[i].name))
            return known[i].sig;
    return 0;
}

void config_read_preempt(cj_ctx_t *c, config_t *cfg)
{
    run_config_t *r = &cfg->run;
    const char *path = "run.preempt_signals";
    cj_strs_push(&c->known, path);
    json_t *arr = cj_lookup(c, c->root, path);
    if (!arr || json_is_null(arr) || cj_is_auto(arr))
        arr = cj_lookup(NULL, c->defaults, path);
    r->n_preempt_signals = 0;
    if (!json_is_array(arr)) {
        cj_invalid(c, path, EXPECTED);
        return;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        const int sig = json_is_string(v) ? signal_by_name(json_string_value(v)) : 0;
        if (!sig) {
            cj_invalid(c, path, EXPECTED);
            return;
        }
        int seen = 0;
        for (int j = 0; j < r->n_preempt_signals; j++)
            seen |= r->preempt_signals[j] == sig;
        if (!seen)
            r->preempt_signals[r->n_preempt_signals++] = sig;
    }
}
