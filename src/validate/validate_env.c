#include "validate/validate_env.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "kernels_info.h"
#include "parallel/world.h"
#include "util/error.h"
#include "validate/validate_compare.h"

/* What kernels_print_backends says (BLAS, CUDA), indented under "backends". */
static char *backends_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return fb_strdup("  (unknown)\n");
    kernels_print_backends(f);
    fclose(f);
    return buf;
}

void validate_env_make(validate_env_t *e, const char *note)
{
    memset(e, 0, sizeof *e);
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    char v[64];
    snprintf(v, sizeof v, "%u.%u.%u", maj, min, rel);
    e->fabula = fb_strdup(PACKAGE_VERSION);
    e->mpi = fb_strdup(parallel_library_version_full());
    e->hdf5 = fb_strdup(v);
    e->backends = backends_text();
    e->blas = validate_blas_line(e->backends);
    e->nodes = parallel_node_list();
    e->world = parallel_size();
    e->note = note;
    size_t n = 64 + strlen(parallel_library_version());
    e->short_line = fb_malloc(n);
    snprintf(e->short_line, n, "%s; HDF5 %s", parallel_library_version(), v);
    for (char *p = e->short_line; *p; p++)
        if (*p == '\t')
            *p = ' ';
}

void validate_env_print(const validate_env_t *e)
{
    printf("environment:\n");
    printf("  fabula  %s\n", e->fabula);
    printf("  MPI     %s\n", e->mpi);
    printf("  HDF5    %s (parallel)\n", e->hdf5);
    printf("  backends (BLAS, CUDA):\n%s", e->backends);
    printf("  ranks   %d x 1 thread (OMP_NUM_THREADS=1: the layout of the curves)\n", e->world);
    printf("  nodes   %s\n", e->nodes);
    if (e->note)
        printf("  note    %s\n", e->note);
}

void validate_env_free(validate_env_t *e)
{
    free(e->fabula);
    free(e->mpi);
    free(e->hdf5);
    free(e->backends);
    free(e->blas);
    free(e->nodes);
    free(e->short_line);
    memset(e, 0, sizeof *e);
}
