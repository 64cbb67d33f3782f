#include "parallel/mpi_io.h"

#include "parallel/comm_internal.h"
#include "util/error.h"

void parallel_h5_fapl_mpio(hid_t fapl, comm_t *c)
{
    FB_ASSERT(!c->backend);
    CHECK_H5(H5Pset_fapl_mpio(fapl, c->mpi, MPI_INFO_NULL));
}

void parallel_h5_dxpl_collective(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
}

void parallel_h5_dxpl_independent(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT));
}
