/* What the unit tests share: the check counters, EXPECT and its form for
 * tests under mpiexec (EXPECT_RANK), a row of a results table, the path of a
 * file of the source tree (FB_SRCDIR, set by `make check`), running a
 * function in a forked child to observe how it exits and reading back what
 * it wrote, and scratch memory freed all at once.
 *
 * Include it once per test program, from its .c file (the counters below are
 * that program's own). Everything here is static, so each test stays one
 * self-contained translation unit. */
#ifndef FB_TESTS_TESTLIB_H
#define FB_TESTS_TESTLIB_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* How many EXPECTs ran and how many failed; main reports both and exits
 * with failures ? 1 : 0. */
static int checks, failures;

/* Counts a check; on failure prints the place, the condition and a
 * printf-style explanation to stderr, and carries on (one run reports every
 * broken check, not only the first). */
#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                            \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

/* EXPECT for a program run under mpiexec (the shell tests grep its output):
 * the failure goes to stdout, flushed at once so that each rank's line
 * stays whole in the shared log, and names the world rank and `label`, the
 * string that says what the test is at. */
#define EXPECT_RANK(rank, label, cond, ...)                                                                            \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL rank %d [%s]: ", rank, label);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
            fflush(stdout);                                                                                            \
        }                                                                                                              \
    } while (0)

/* One row of a test's table of results, "  OP WHAT ok" or "... FAIL" with
 * WHAT in a column `width` wide; counts the check and, when cond is false,
 * the failure. */
static inline void testlib_row(const char *op, int width, const char *what, int cond)
{
    checks++;
    printf("  %-16s %-*s %s\n", op, width, what, cond ? "ok" : "FAIL");
    if (!cond)
        failures++;
}

/* The path of `rel` under the source tree, in a static buffer, or NULL when
 * FB_SRCDIR is unset (a test run by hand outside `make check`): then it says
 * "<what>: FB_SRCDIR unset, skipped" so the skipped part is visible. */
static inline const char *testlib_srcdir_file(const char *rel, const char *what)
{
    static char path[4096];
    const char *src = getenv("FB_SRCDIR");
    if (!src) {
        printf("%s: FB_SRCDIR unset, skipped\n", what);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", src, rel);
    return path;
}

/* Runs fn(arg) in a forked child and returns its exit status, or -1 if it
 * did not exit normally (killed by a signal). Returning from fn counts as
 * exit 0. With err_path, the child's stderr goes to that file (to silence
 * or to capture it); the caller's streams are flushed first so that nothing
 * buffered is printed twice. A failed fork or wait ends the test (exit 1). */
static inline int testlib_child_exit(void (*fn)(const void *), const void *arg, const char *err_path)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        if (err_path && !freopen(err_path, "w", stderr))
            _exit(99);
        fn(arg);
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            perror("waitpid");
            exit(1);
        }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The text of the file at `path` (at most cap - 1 bytes, NUL-terminated) in
 * buf: what a child wrote to its err_path; "" when there is no such file. */
static inline void testlib_read_text(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Scratch memory for a test that frees everything it allocated at once,
 * between cases: testlib_scratch returns zeroed memory (never NULL; a failed
 * allocation or more than TESTLIB_SCRATCH_MAX live blocks ends the test,
 * exit 1), testlib_scratch_free_all frees every block handed out. The list
 * lives inside a function so that a test that does not use it has no unused
 * static object. */
#define TESTLIB_SCRATCH_MAX 1024

typedef struct testlib_scratch_list {
    void *block[TESTLIB_SCRATCH_MAX];
    int n;
} testlib_scratch_list_t;

static inline testlib_scratch_list_t *testlib_scratch_list(void)
{
    static testlib_scratch_list_t list;
    return &list;
}

static inline void *testlib_scratch(size_t bytes)
{
    testlib_scratch_list_t *l = testlib_scratch_list();
    if (l->n == TESTLIB_SCRATCH_MAX) {
        fprintf(stderr, "testlib_scratch: more than %d blocks live\n", TESTLIB_SCRATCH_MAX);
        exit(1);
    }
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        perror("testlib_scratch");
        exit(1);
    }
    l->block[l->n++] = p;
    return p;
}

static inline void testlib_scratch_free_all(void)
{
    testlib_scratch_list_t *l = testlib_scratch_list();
    while (l->n > 0)
        free(l->block[--l->n]);
}

#endif
