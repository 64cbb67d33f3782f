/* CHECK_MPI: the one check of every MPI call in src/parallel. Private to
 * this directory (the only place that includes mpi.h). MPI errors come back
 * as codes because parallel_init sets MPI_ERRORS_RETURN on the world, and
 * every communicator made from it inherits (or is given) that handler. */
#ifndef FABULA_PARALLEL_MPI_CHECK_H
#define FABULA_PARALLEL_MPI_CHECK_H

#include <mpi.h>

#include "util/error.h"

/* On failure: file, line, the call's text and MPI's own message, then the
 * job ends with FB_EXIT_INTERNAL. */
#define CHECK_MPI(call)                                                        \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != MPI_SUCCESS) {                                              \
            char msg_[MPI_MAX_ERROR_STRING];                                   \
            int len_ = 0;                                                      \
            MPI_Error_string(rc_, msg_, &len_);                                \
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, #call, msg_);   \
        }                                                                      \
    } while (0)

#endif
