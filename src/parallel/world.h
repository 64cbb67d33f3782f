/* The MPI world: start-up, shutdown and what every rank knows about its
 * place in it. Collectives over the world go through the comm API on
 * comm_world() (parallel/comm.h). This directory is the only place that
 * includes mpi.h. */
#ifndef FABULA_PARALLEL_WORLD_H
#define FABULA_PARALLEL_WORLD_H

/* MPI_Init; creates comm_world() and registers with util/error.h how fatal
 * errors end the job (MPI_Abort; MPI_Finalize then exit for fb_fatal_all). */
void parallel_init(int *argc, char ***argv);
/* Frees comm_world(), then MPI_Finalize. */
void parallel_finalize(void);
int parallel_rank(void);
int parallel_size(void);
/* This rank among the ranks of its node (MPI_Comm_split_type shared,
 * ordered by world rank) and how many there are; found by parallel_init.
 * A rank binds GPU parallel_local_rank() % device count. */
int parallel_local_rank(void);
int parallel_local_size(void);
double parallel_wtime(void);

/* A library version string, e.g. "MPICH 4.0.2". */
const char *parallel_library_version(void);

#endif
