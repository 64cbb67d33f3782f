#include "util/test_defect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The defects, each a bit of the mask; docs/testing.md describes each. */
static const char *const names[] = {
    "zero_shard_offset",  "ep_route_off_by_one", "tp_reduce_group",
    "pp_microbatch_order", "loss_scale_rule",    "resume_data_position",
};
#define NDEFECTS ((int)(sizeof names / sizeof *names))

static int parsed;
static unsigned mask;
static char unknown[64]; /* the first unknown name, cut to fit; "" if none */

static int defect_index(const char *s, size_t len)
{
    for (int i = 0; i < NDEFECTS; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len))
            return i;
    return -1;
}

/* Splits the variable on commas, spaces around a name ignored, empty items
 * skipped (a trailing comma is harmless). */
static void parse(void)
{
    parsed = 1;
    const char *v = getenv(FB_TEST_DEFECT_ENV);
    if (!v)
        return;
    while (*v) {
        while (*v == ' ' || *v == ',')
            v++;
        const char *end = v;
        while (*end && *end != ',')
            end++;
        size_t len = (size_t)(end - v);
        while (len > 0 && v[len - 1] == ' ')
            len--;
        if (len > 0) {
            int i = defect_index(v, len);
            if (i >= 0)
                mask |= 1u << i;
            else if (!unknown[0])
                snprintf(unknown, sizeof unknown, "%.*s", (int)len, v);
        }
        v = end;
    }
}

int fb_test_defect(const char *name)
{
    if (!parsed)
        parse();
    if (!mask)
        return 0;
    const int i = defect_index(name, strlen(name));
    FB_ASSERT(i >= 0);
    return (mask >> i) & 1u;
}

/* This process's rank as the launcher tells it (MPICH's Hydra, Open MPI,
 * PMIx, Slurm), before MPI is up; -1 when none says. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            char *end;
            long r = strtol(v, &end, 10);
            if (*end == '\0' && r >= 0)
                return (int)r;
        }
    }
    return -1;
}

void fb_test_defect_check(void)
{
    if (!parsed)
        parse();
    const int rank = launcher_rank();
    if (unknown[0]) {
        /* MPI is not up yet, so every process fails alike and exits by
         * itself; the launcher's rank 0 (or every process, where no
         * launcher says) prints the one message */
        char list[256] = "";
        for (int i = 0; i < NDEFECTS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
        if (rank <= 0)
            fb_fatal_all(FB_EXIT_USAGE, "%s: unknown defect '%s' (known: %s)", FB_TEST_DEFECT_ENV, unknown, list);
        exit(FB_EXIT_USAGE);
    }
    if (mask && rank <= 0)
        fb_warn("%s=%s injects a defect on purpose: for fabula's own tests only", FB_TEST_DEFECT_ENV,
                getenv(FB_TEST_DEFECT_ENV));
}
