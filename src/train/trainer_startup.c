/* The trainer's start-up checks that every rank must agree on: a run dir
 * held by another job, an input that cannot be read, an output folder that
 * cannot be made, a vocabulary that cannot grow. Each is one message and
 * the same exit code on every rank, never an MPI_Abort while other ranks
 * run on (mpiexec's exit status then depended on which process it saw end
 * first). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/rundir.h"
#include "parallel/comm.h"
#include "parallel/world.h"
#include "train/trainer_impl.h"
#include "util/error.h"

/* The effective config with model.vocab_size = V (a grown vocabulary),
 * so that the run dir and the checkpoints describe the model they hold
 * (a resume or `fabula eval` reads it back: docs/init-from.md). */
static char *with_vocab_size(const char *text, int V)
{
    json_error_t err;
    json_t *root = json_loads(text, JSON_PRESERVE_ORDER, &err);
    json_t *m = root ? json_object_get(root, "model") : NULL;
    FB_ASSERT(json_is_object(m) && json_object_set_new(m, "vocab_size", json_integer(V)) == 0);
    char *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(16));
    FB_ASSERT(out);
    json_decref(root);
    char *copy = fb_strdup(out);
    free(out);
    return copy;
}

void trainer_grow_vocab(trainer_t *tr)
{
    const config_t *cfg = tr->cfg;
    if (tr->data.vocab_grow <= cfg->model.vocab_size)
        return;
    /* the tp ranks split the vocabulary rows, and it is not padded */
    if (tr->data.vocab_grow % cfg->parallel.tensor_parallel_size != 0)
        fb_fatal_all(FB_EXIT_USAGE, "model.init_from: the tokenizer's appended special tokens grow the vocabulary "
                     "from %d to %d rows, not a multiple of parallel.tensor_parallel_size = %d", cfg->model.vocab_size,
                     tr->data.vocab_grow, cfg->parallel.tensor_parallel_size);
    tr->grown = *cfg;
    tr->grown.model.vocab_size = tr->data.vocab_grow;
    tr->grown.effective_json = with_vocab_size(cfg->effective_json, tr->grown.model.vocab_size);
    if (tr->rank == 0)
        printf("fabula: model.init_from: the vocabulary grows from %d to %d rows for the tokenizer's appended "
               "special tokens (their rows start as the mean of the others)\n",
               cfg->model.vocab_size, tr->grown.model.vocab_size);
    tr->cfg = &tr->grown;
}

/* One job per run directory: a second job on it would trim the first's
 * metrics and mix its checkpoints into the first's. Rank 0 holds the lock
 * (io/rundir.h) for the whole run; every rank learns the verdict, so all
 * exit cleanly after rank 0's message. */
typedef struct lock_try {
    const char *dir;
    char holder[256];
    int locked;
} lock_try_t;

static void lock_step(void *arg)
{
    lock_try_t *l = arg;
    l->locked = rundir_lock(l->dir, l->holder, sizeof l->holder);
}

void trainer_lock_run_dir(const trainer_t *tr)
{
    static char msg[1 << 12];
    const config_t *cfg = tr->cfg;
    lock_try_t l = {.dir = cfg->run.run_dir};
    /* a run dir that cannot be made: one message, no MPI_Abort (trainer_outputs_prepare) */
    parallel_agree_outcome(tr->rank == 0 ? fb_catch(lock_step, &l, msg, sizeof msg) : 0, msg);
    int locked = l.locked;
    const char *holder = l.holder;
    comm_bcast(comm_world(), &locked, sizeof locked, 0);
    if (!locked)
        fb_fatal_all(FB_EXIT_USAGE, "run directory %s is in use by another fabula job (%s; lock file %s/.lock): "
                     "give this job its own --run-dir, or wait for that one to end", cfg->run.run_dir, holder,
                     cfg->run.run_dir);
}

static void data_open_step(void *arg)
{
    trainer_t *tr = arg;
    data_source_open(&tr->data, tr->cfg, tr->rank == 0);
    if (tr->cfg->run.eval_interval > 0) {
        char who[64];
        snprintf(who, sizeof who, "run.eval_interval = %ld", tr->cfg->run.eval_interval);
        data_source_open_valid(&tr->valid, tr->cfg, tr->rank == 0, who);
    }
}

/* Every rank reads the input alike; a missing or refused corpus is one
 * message and a clean exit, not a message per rank and MPI_Abort. */
void trainer_data_open(trainer_t *tr)
{
    static char msg[1 << 14];
    int code = fb_catch(data_open_step, tr, msg, sizeof msg);
    parallel_agree_outcome(code, msg);
}

static void outputs_prepare_step(void *arg)
{
    const config_t *cfg = ((trainer_t *)arg)->cfg;
    rundir_prepare(cfg->run.run_dir, cfg->effective_json);
    train_tboard_make_dirs(cfg);
}

/* Rank 0 makes the run dir and the monitoring folders; a path that cannot
 * be made is one message and the same exit code on every rank. Found
 * lazily by rank 0 alone, it was an MPI_Abort while the others ran on. */
void trainer_outputs_prepare(trainer_t *tr)
{
    static char msg[1 << 12];
    const int code = tr->rank == 0 ? fb_catch(outputs_prepare_step, tr, msg, sizeof msg) : 0;
    parallel_agree_outcome(code, msg);
}
