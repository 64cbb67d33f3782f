/* The MPI world: start-up, shutdown and the few world-wide collectives the
 * trainer needs (process groups and the comm API build on this). This
 * directory is the only place that includes mpi.h. */
#ifndef FABULA_PARALLEL_WORLD_H
#define FABULA_PARALLEL_WORLD_H

#include <stddef.h>

void parallel_init(int *argc, char ***argv);
void parallel_finalize(void);
int parallel_rank(void);
int parallel_size(void);
/* This rank among the ranks of its node (MPI_Comm_split_type shared,
 * ordered by world rank) and how many there are; found by parallel_init.
 * A rank binds GPU world_local_rank() % device count. */
int world_local_rank(void);
int world_local_size(void);
/* The same as world_local_size (older name). */
int parallel_local_size(void);
double parallel_wtime(void);
void parallel_barrier(void);

/* In-place sums over the world. */
void parallel_allreduce_sum_f32(float *buf, size_t n);
void parallel_allreduce_sum_f64(double *buf, size_t n);
void parallel_allreduce_max_f64(double *buf, size_t n);
void parallel_allreduce_sum_i64(long long *buf, size_t n);
void parallel_bcast(void *buf, size_t bytes, int root);

/* A library version string, e.g. "MPICH 4.0.2". */
const char *parallel_library_version(void);

#endif
