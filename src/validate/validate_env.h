/* What a validation ran on, for the console, the curves it writes and the
 * site report: MPI, HDF5, the backends line (BLAS and the kernel set it
 * chose, CUDA), the ranks and their hosts. */
#ifndef FABULA_VALIDATE_ENV_H
#define FABULA_VALIDATE_ENV_H

typedef struct validate_env {
    char *fabula;           /* version */
    char *mpi;              /* MPI_Get_library_version, one line */
    char *hdf5;             /* "1.10.8" */
    char *backends;         /* kernels_print_backends' lines */
    char *blas;             /* the BLAS line (validate_blas_line) */
    char *nodes;            /* the hosts of the ranks */
    char *short_line;       /* a curve's "environment": MPI and HDF5 */
    int world;
    const char *note;       /* --ranks-note, or NULL */
} validate_env_t;

/* Collective (the hosts are gathered). */
void validate_env_make(validate_env_t *e, const char *note);
void validate_env_print(const validate_env_t *e);
void validate_env_free(validate_env_t *e);

#endif
