/* Job-wide abort, separate from world.h so util/ can call it without
 * depending on the rest of the parallel layer. */
#ifndef FABULA_PARALLEL_ABORT_H
#define FABULA_PARALLEL_ABORT_H

/* MPI_Abort on MPI_COMM_WORLD with `code` (never returns). */
_Noreturn void parallel_abort(int code);

#endif
