#include "train/train_threads.h"

#include <stdlib.h>

#include "kernels_info.h"
#include "parallel/world.h"

int train_choose_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS");
    int n = env ? atoi(env) : 0;
    if (n < 1) {
        int local = parallel_local_size();
        n = kernels_cpu_available() / (local > 0 ? local : 1);
    }
    kernels_cpu_set_threads(n < 1 ? 1 : n);
    return kernels_cpu_threads();
}
