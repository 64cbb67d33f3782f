/* Job-wide abort, separate from world.h so util/ can call it without
 * depending on the rest of the parallel layer. */
#ifndef FABULA_PARALLEL_ABORT_H
#define FABULA_PARALLEL_ABORT_H

/* MPI_Abort on MPI_COMM_WORLD with `code` (never returns). */
_Noreturn void parallel_abort(int code);
/* MPI_Finalize, then exit(code): every rank ending on the same error. */
_Noreturn void parallel_exit(int code);

/* A function parallel_abort runs on the failing rank before the job goes
 * down (e.g. removing a half-written file); NULL clears it. */
void parallel_set_abort_hook(void (*hook)(void));

#endif
