/* What the unit tests share: the check counters and EXPECT, the path of a
 * file of the source tree (FB_SRCDIR, set by `make check`), and running a
 * function in a forked child to observe how it exits.
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

#endif
