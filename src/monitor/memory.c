#include "monitor/memory.h"

#include <sys/resource.h>
#include <unistd.h>

size_t memory_rss_peak(void)
{
    struct rusage ru;
    /* a monitor reading must not end a run: 0 reads as "unknown" */
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024u;
}

size_t memory_physical(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (size_t)pages * (size_t)page;
}
