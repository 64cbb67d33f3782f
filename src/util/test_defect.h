/* Test-only defects (docs/testing.md, "Injected defects"): small wrong
 * changes of the kind a real bug would be, one per feature family, that
 * fabula's own tests switch on to prove that `fabula validate` and the
 * invariance tests catch such a bug. The environment variable
 * FABULA_TEST_DEFECT names the switched-on defects, comma-separated. It is
 * never for a job: a run with it set trains the wrong thing on purpose. */
#ifndef FABULA_UTIL_TEST_DEFECT_H
#define FABULA_UTIL_TEST_DEFECT_H

#define FB_TEST_DEFECT_ENV "FABULA_TEST_DEFECT"

/* 1 when FABULA_TEST_DEFECT names `name`, else 0. The variable is read once
 * and cached; unset (the normal case), every call is one test of a cached
 * mask. `name` must be one of the defects fabula knows (an internal error
 * otherwise, so a site cannot silently ask for a misspelled one). */
int fb_test_defect(const char *name);

/* Called once at start, before any command, on every rank alike: an
 * unknown name in FABULA_TEST_DEFECT ends the process with FB_EXIT_USAGE,
 * naming it and listing the known ones; a valid setting prints one warning
 * line on stderr (from the launcher's rank 0 where the launcher says which
 * rank this is, else from every process). */
void fb_test_defect_check(void);

#endif
