/* The MPI-IO settings of HDF5 file access and transfer property lists (the
 * MPI communicator never leaves src/parallel). */
#ifndef FABULA_PARALLEL_MPI_IO_H
#define FABULA_PARALLEL_MPI_IO_H

#include <hdf5.h>

#include "parallel/comm.h"

/* MPI-IO hints (checkpoint.mpi_info, prep.mpi_info: docs/config.md), as the
 * config gives them: n string pairs, passed to MPI_Info_set in order. The
 * MPI library decides which it honours; an unknown key is ignored by MPI. */
typedef struct mpi_hints {
    int n;
    char **key;
    char **value;
} mpi_hints_t;

/* Adds one pair (copies of both strings). */
void mpi_hints_add(mpi_hints_t *h, const char *key, const char *value);
void mpi_hints_free(mpi_hints_t *h);

/* Makes `fapl` open files through MPI-IO on the ranks of `c` (a host comm,
 * e.g. comm_world()), so that H5Fcreate/H5Fopen with it are collective
 * over them. `hints` (NULL or empty: none) become the MPI_Info HDF5 hands
 * to MPI_File_open. */
void parallel_h5_fapl_mpio(hid_t fapl, comm_t *c, const mpi_hints_t *hints);

/* Data transfers with `dxpl` are collective (every rank calls H5Dwrite or
 * H5Dread, possibly with an empty selection) or independent. */
void parallel_h5_dxpl_collective(hid_t dxpl);
void parallel_h5_dxpl_independent(hid_t dxpl);

#endif
