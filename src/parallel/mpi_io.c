#include "parallel/mpi_io.h"

#include <limits.h>
#include <string.h>

#include "parallel/mpi_check.h"
#include "parallel/world.h"
#include "util/error.h"

/* MPI counts are int: long vectors go in INT_MAX-sized pieces. */
static size_t piece(size_t n) { return n > (size_t)INT_MAX ? (size_t)INT_MAX : n; }

void parallel_exscan_sum_i64(long long *buf, size_t n)
{
    if (parallel_size() > 1) {
        for (size_t done = 0; done < n;) {
            size_t k = piece(n - done);
            CHECK_MPI(MPI_Exscan(MPI_IN_PLACE, buf + done, (int)k, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
            done += k;
        }
    }
    /* MPI leaves rank 0's buffer undefined; an empty prefix sums to 0. */
    if (parallel_rank() == 0)
        memset(buf, 0, n * sizeof *buf);
}

void parallel_allreduce_max_i64(long long *buf, size_t n)
{
    if (parallel_size() == 1)
        return;
    for (size_t done = 0; done < n;) {
        size_t k = piece(n - done);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf + done, (int)k, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
        done += k;
    }
}

void parallel_h5_fapl_mpio(hid_t fapl)
{
    CHECK_H5(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
}

void parallel_h5_dxpl_collective(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
}

void parallel_h5_dxpl_independent(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT));
}
