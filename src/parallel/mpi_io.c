#include "parallel/mpi_io.h"

#include <stdlib.h>
#include <string.h>

#include "parallel/comm_internal.h"
#include "parallel/mpi_check.h"
#include "util/error.h"

void mpi_hints_add(mpi_hints_t *h, const char *key, const char *value)
{
    h->key = fb_realloc(h->key, (size_t)(h->n + 1) * sizeof *h->key);
    h->value = fb_realloc(h->value, (size_t)(h->n + 1) * sizeof *h->value);
    h->key[h->n] = fb_strdup(key);
    h->value[h->n] = fb_strdup(value);
    h->n++;
}

void mpi_hints_free(mpi_hints_t *h)
{
    for (int i = 0; i < h->n; i++) {
        free(h->key[i]);
        free(h->value[i]);
    }
    free(h->key);
    free(h->value);
    memset(h, 0, sizeof *h);
}

void parallel_h5_fapl_mpio(hid_t fapl, comm_t *c, const mpi_hints_t *hints)
{
    FB_ASSERT(!c->backend);
    if (!hints || hints->n == 0) {
        CHECK_H5(H5Pset_fapl_mpio(fapl, c->mpi, MPI_INFO_NULL));
        return;
    }
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    for (int i = 0; i < hints->n; i++) {
        /* MPI refuses keys and values longer than its limits with an
         * error that would not name the config key: say which it is */
        if (strlen(hints->key[i]) >= MPI_MAX_INFO_KEY || strlen(hints->value[i]) >= MPI_MAX_INFO_VAL)
            fb_fatal(FB_EXIT_USAGE, "MPI-IO hint \"%s\": key longer than %d or value longer than %d characters",
                     hints->key[i], MPI_MAX_INFO_KEY - 1, MPI_MAX_INFO_VAL - 1);
        CHECK_MPI(MPI_Info_set(info, hints->key[i], hints->value[i]));
    }
    /* HDF5 duplicates the info object, so ours can go at once */
    CHECK_H5(H5Pset_fapl_mpio(fapl, c->mpi, info));
    CHECK_MPI(MPI_Info_free(&info));
}

void parallel_h5_dxpl_collective(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
}

void parallel_h5_dxpl_independent(hid_t dxpl)
{
    CHECK_H5(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT));
}
