/* The node list of `fabula validate`: which host each rank runs on. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/mpi_check.h"
#include "parallel/world.h"
#include "util/error.h"

/* Appends "a" or "a-b" for the run of ranks [a, b], comma-separated. */
static void append_range(char **s, size_t *len, size_t *cap, int a, int b, int first)
{
    char part[48];
    int n = a == b ? snprintf(part, sizeof part, "%s%d", first ? "" : ",", a)
                   : snprintf(part, sizeof part, "%s%d-%d", first ? "" : ",", a, b);
    if (*len + (size_t)n + 1 > *cap) {
        *cap = 2 * (*len + (size_t)n + 1);
        *s = fb_realloc(*s, *cap);
    }
    memcpy(*s + *len, part, (size_t)n + 1);
    *len += (size_t)n;
}

static void append_text(char **s, size_t *len, size_t *cap, const char *t)
{
    size_t n = strlen(t);
    if (*len + n + 1 > *cap) {
        *cap = 2 * (*len + n + 1);
        *s = fb_realloc(*s, *cap);
    }
    memcpy(*s + *len, t, n + 1);
    *len += n;
}

char *parallel_node_list(void)
{
    const int size = parallel_size();
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 0, sizeof name);
    int nlen = 0;
    CHECK_MPI(MPI_Get_processor_name(name, &nlen));
    char *all = fb_malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
    CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD));
    char *done = fb_calloc((size_t)size, 1);
    size_t len = 0, cap = 64;
    char *out = fb_malloc(cap);
    out[0] = '\0';
    for (int r = 0; r < size; r++) {
        if (done[r])
            continue;
        const char *host = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        if (len)
            append_text(&out, &len, &cap, ", ");
        append_text(&out, &len, &cap, host);
        append_text(&out, &len, &cap, " (rank");
        int count = 0;
        for (int q = r; q < size; q++)
            count += !strcmp(all + (size_t)q * MPI_MAX_PROCESSOR_NAME, host);
        append_text(&out, &len, &cap, count > 1 ? "s " : " ");
        int first = 1;
        for (int q = r; q < size;) {
            if (strcmp(all + (size_t)q * MPI_MAX_PROCESSOR_NAME, host) != 0) {
                q++;
                continue;
            }
            int b = q;
            while (b + 1 < size && !strcmp(all + (size_t)(b + 1) * MPI_MAX_PROCESSOR_NAME, host))
                b++;
            for (int k = q; k <= b; k++)
                done[k] = 1;
            append_range(&out, &len, &cap, q, b, first);
            first = 0;
            q = b + 1;
        }
        append_text(&out, &len, &cap, ")");
    }
    free(done);
    free(all);
    return out;
}
