/* Error reporting and exit codes shared by every part of fabula.
 *
 * Two kinds of failure:
 *  - a call that should not fail did (libc, MPI, HDF5, BLAS, ...): the CHECK_*
 *    macros print file:line, the call text and the library's own message,
 *    then abort the whole MPI job with FB_EXIT_INTERNAL or FB_EXIT_IO;
 *  - a mistake the user can fix (config, input data, usage): fb_fatal()
 *    prints one clear message (once, from the calling rank) and exits with
 *    the documented code.
 */
#ifndef FABULA_UTIL_ERROR_H
#define FABULA_UTIL_ERROR_H

#include <stddef.h>

/* The CUDA sources (C++) include this header too. */
#ifdef __cplusplus
#define FB_NORETURN [[noreturn]]
extern "C" {
#else
#define FB_NORETURN _Noreturn
#endif

enum fb_exit_code {
    FB_EXIT_OK = 0,
    FB_EXIT_INTERNAL = 1,  /* a bug or an unexpected library failure */
    FB_EXIT_USAGE = 2,     /* bad command line or config */
    FB_EXIT_DATA = 3,      /* bad input data (corpus, tokenizer, reference) */
    FB_EXIT_IO = 4,        /* file system: cannot read, write, rename */
    FB_EXIT_DIVERGED = 5,  /* NaN/Inf in loss or gradients */
    FB_EXIT_VALIDATION = 6, /* `fabula validate`: a loss outside its curve's tolerance */
    FB_EXIT_PREEMPTED = 75, /* checkpoint written after SIGUSR1/SIGTERM */
    FB_EXIT_HUNG = 76       /* the hang watchdog ended a step that ran past its bound (docs/reliability.md) */
};

/* Prints "fabula: error: <msg>" on stderr and terminates the process (and,
 * when MPI is up, the job) with `code`. */
FB_NORETURN void fb_fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For an error every rank detects alike (a bad config): rank 0 prints the
 * message, then every rank leaves MPI cleanly and exits with `code`.
 * MPI_Abort would let the launcher end the job before it has forwarded
 * rank 0's message. (A rank that does not detect it is ended by the
 * launcher when the others exit non-zero.) */
FB_NORETURN void fb_fatal_all(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failed internal call: names where and what. */
FB_NORETURN void fb_fail_call(int code, const char *file, int line, const char *call, const char *detail);

/* Warnings and information go to stderr / stdout prefixed with "fabula:". */
void fb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How a fatal error ends the process once MPI is up. util calls nothing
 * above it, so the MPI layer registers these at parallel_init (and clears
 * them at parallel_finalize):
 *  - the abort hook: fb_fatal, fb_fail_call and fb_abort end the whole job
 *    through it (MPI_Abort), so no other rank is left waiting in a
 *    collective;
 *  - the exit hook: fb_fatal_all leaves MPI on this rank through it.
 * Each is called with the exit code and must not return. NULL: plain exit. */
void fb_set_abort_hook(void (*hook)(int code));
void fb_set_exit_hook(void (*hook)(int code));

/* Run once on this rank, before the abort hook, when a fatal error ends the
 * job (e.g. removing a half-written file); NULL clears it. A cleanup that
 * fails itself is not run again. */
void fb_set_abort_cleanup(void (*cleanup)(void));

/* Called once, before the cleanup and the hooks, with the exit code and the
 * message of the fatal error that ends this process (fb_fatal, fb_fail_call:
 * all = 0, this rank's own failure; fb_fatal_all: all = 1, every rank fails
 * alike): a training run records its failure in the run directory
 * (train/job_log.c). Not called inside fb_catch. NULL clears it. */
void fb_set_fatal_note(void (*note)(int code, const char *msg, int all));

/* Runs the cleanup and ends the job with `code` like fb_fatal, for a caller
 * that printed its own message. */
FB_NORETURN void fb_abort(int code);

/* Ends the job with `code` from a thread other than the one running MPI
 * (the hang watchdog, whose main thread is stuck inside an MPI call): the
 * fatal note records `msg` as this rank's own failure, the cleanup runs,
 * then the abort hook (MPI_Abort: the one MPI call made off the main
 * thread, as the launcher then ends every rank with this code whatever
 * state the main thread is in), else every signal blocked and _Exit. */
FB_NORETURN void fb_exit_now(int code, const char *msg);

/* Runs fn(arg) with fb_fatal and fb_fail_call caught instead of ending the
 * job: returns 0 when fn returns, else the exit code, with the message
 * (without the "fabula: error: " prefix) in msg[cap]. For a step one rank
 * runs first on behalf of all (loading a tokenizer): it shares the outcome
 * and every rank then leaves through fb_fatal_all, so the error is printed
 * once and MPI_Abort's noise is not. fn is abandoned where it failed (its
 * allocations leak), so the caller must end the process on failure; no
 * cleanup or abort hook runs. Not nested, not thread-safe. */
int fb_catch(void (*fn)(void *arg), void *arg, char *msg, size_t cap);

/* This process's rank in the job, named in messages (0 until set). */
void fb_error_set_rank(int rank);
int fb_error_rank(void);

/* malloc/calloc that never return NULL (fail with FB_EXIT_INTERNAL). */
void *fb_malloc(size_t n);
void *fb_calloc(size_t n, size_t size);
void *fb_realloc(void *p, size_t n);
char *fb_strdup(const char *s);

/* libc calls that return -1/NULL and set errno. */
#define CHECK_SYS(call)                                                       \
    do {                                                                      \
        if ((call) < 0)                                                       \
            fb_fail_call(FB_EXIT_IO, __FILE__, __LINE__, #call, NULL);        \
    } while (0)

/* HDF5 calls return a negative herr_t/hid_t on failure. */
#define CHECK_H5(call)                                                        \
    do {                                                                      \
        if ((long long)(call) < 0)                                            \
            fb_fail_call(FB_EXIT_IO, __FILE__, __LINE__, #call, "HDF5 call failed (see the HDF5 error stack above)"); \
    } while (0)

#define FB_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond))                                                          \
            fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, #cond, "assertion failed"); \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
