/* What parallel file writers need from MPI: prefix sums that turn each
 * rank's counts into its offsets in a shared file, and the MPI-IO settings of
 * HDF5 file access and transfer property lists (the MPI communicator never
 * leaves src/parallel). */
#ifndef FABULA_PARALLEL_MPI_IO_H
#define FABULA_PARALLEL_MPI_IO_H

#include <hdf5.h>
#include <stddef.h>

/* In place, element by element: rank r receives the sum of buf over ranks
 * 0..r-1 (MPI_Exscan); rank 0 receives zeros. */
void parallel_exscan_sum_i64(long long *buf, size_t n);

/* In place, element by element: the maximum over all ranks. */
void parallel_allreduce_max_i64(long long *buf, size_t n);

/* Makes `fapl` open files through MPI-IO on the world communicator, so that
 * H5Fcreate/H5Fopen with it are collective over all ranks. */
void parallel_h5_fapl_mpio(hid_t fapl);

/* Data transfers with `dxpl` are collective (every rank calls H5Dwrite or
 * H5Dread, possibly with an empty selection) or independent. */
void parallel_h5_dxpl_collective(hid_t dxpl);
void parallel_h5_dxpl_independent(hid_t dxpl);

#endif
