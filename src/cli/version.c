#include <hdf5.h>
#include <jansson.h>
#include <stdio.h>

#include "build_config.h"
#include "cli/cli.h"
#include "kernels_info.h"

void cli_print_version(void)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    printf("fabula %s\n", PACKAGE_VERSION);
    printf("  HDF5 %u.%u.%u (parallel)\n", maj, min, rel);
    printf("  jansson %s\n", jansson_version_str());
#ifdef HAVE_PAPI
    printf("  PAPI: built in\n");
#else
    printf("  PAPI: not built (timers only)\n");
#endif
    kernels_print_backends(stdout);
}
