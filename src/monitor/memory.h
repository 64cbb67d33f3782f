/* Host memory of this process: the resident-set high-water mark, and the
 * machine's physical memory (the denominator of the memory-pressure
 * verdict). */
#ifndef FABULA_MONITOR_MEMORY_H
#define FABULA_MONITOR_MEMORY_H

#include <stddef.h>

/* Peak resident set of this process in bytes since it started
 * (getrusage's ru_maxrss, which Linux keeps in KiB: VmHWM of
 * /proc/self/status). 0 when the call fails. */
size_t memory_rss_peak(void);

/* Physical memory of the machine in bytes (sysconf), 0 when unknown. */
size_t memory_physical(void);

#endif
