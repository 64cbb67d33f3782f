/* The MPI-IO settings of HDF5 file access and transfer property lists (the
 * MPI communicator never leaves src/parallel). */
#ifndef FABULA_PARALLEL_MPI_IO_H
#define FABULA_PARALLEL_MPI_IO_H

#include <hdf5.h>

#include "parallel/comm.h"

/* Makes `fapl` open files through MPI-IO on the ranks of `c` (a host comm,
 * e.g. comm_world()), so that H5Fcreate/H5Fopen with it are collective
 * over them. */
void parallel_h5_fapl_mpio(hid_t fapl, comm_t *c);

/* Data transfers with `dxpl` are collective (every rank calls H5Dwrite or
 * H5Dread, possibly with an empty selection) or independent. */
void parallel_h5_dxpl_collective(hid_t dxpl);
void parallel_h5_dxpl_independent(hid_t dxpl);

#endif
