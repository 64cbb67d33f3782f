/* What kernel backends this build has, for `fabula --version` and run logs. */
#ifndef FABULA_KERNELS_KERNELS_INFO_H
#define FABULA_KERNELS_KERNELS_INFO_H

#include <stdio.h>

/* One line per backend ("  backend cpu: ..."), then, with CUDA, the devices. */
void kernels_print_backends(FILE *f);


/* Threads of the CPU backend (OpenMP and, with OpenBLAS, its pool). */
void kernels_cpu_set_threads(int n);
int kernels_cpu_threads(void);
/* Processors this process may run on (respects affinity/cgroups). */
int kernels_cpu_available(void);

#endif
