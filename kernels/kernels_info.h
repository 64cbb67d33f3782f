/* What kernel backends this build has, for `fabula --version` and run logs. */
#ifndef FABULA_KERNELS_KERNELS_INFO_H
#define FABULA_KERNELS_KERNELS_INFO_H

#include <stdio.h>

/* One line per backend ("  backend cpu: ..."), then, with CUDA, the devices. */
void kernels_print_backends(FILE *f);

#endif
