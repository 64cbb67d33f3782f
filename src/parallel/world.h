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

/* Collective: each rank gives the outcome of a step it ran with fatal
 * errors caught (fb_catch: code 0 when it went well, else the code and the
 * message). When every code is 0 it returns; otherwise every rank leaves
 * through fb_fatal_all with the code and message of the lowest failing
 * rank, printed once by rank 0, so a clean error is not followed by
 * MPI_Abort's notice nor repeated per rank. msg is read on that rank only.
 * For a step rank 0 runs first on behalf of all (reading a tokenizer), the
 * other ranks pass 0. */
void parallel_agree_outcome(int code, const char *msg);

/* A library version string, e.g. "MPICH 4.0.2". */
const char *parallel_library_version(void);
/* The MPI library's MPI_Get_library_version text on one line: its first
 * lines (version, release date, device) joined by "; ", without the
 * configure and compiler lines MPICH appends. */
const char *parallel_library_version_full(void);

/* Collective over the world: the hosts the ranks run on, in rank order of
 * their first rank, as "host0 (ranks 0-1), host1 (ranks 2-3)" (a host's
 * ranks listed as ranges). A new string on every rank (free()). */
char *parallel_node_list(void);

#endif
