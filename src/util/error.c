#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int my_rank;
static void (*abort_hook)(int code);
static void (*exit_hook)(int code);
static void (*abort_cleanup)(void);

void fb_set_abort_hook(void (*hook)(int code)) { abort_hook = hook; }
void fb_set_exit_hook(void (*hook)(int code)) { exit_hook = hook; }
void fb_set_abort_cleanup(void (*cleanup)(void)) { abort_cleanup = cleanup; }

void fb_error_set_rank(int rank) { my_rank = rank; }
int fb_error_rank(void) { return my_rank; }

void fb_abort(int code)
{
    fflush(stdout);
    fflush(stderr);
    /* Cleared first: a cleanup that fails itself must not run again. */
    void (*cleanup)(void) = abort_cleanup;
    abort_cleanup = NULL;
    if (cleanup)
        cleanup();
    if (abort_hook)
        abort_hook(code);
    exit(code);
}

/* "fabula: <kind>: <message>" on stderr. */
static void say(const char *kind, const char *fmt, va_list ap)
{
    fprintf(stderr, "fabula: %s: ", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void fb_fatal(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("error", fmt, ap);
    va_end(ap);
    fb_abort(code);
}

void fb_fatal_all(int code, const char *fmt, ...)
{
    if (my_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        say("error", fmt, ap);
        va_end(ap);
    }
    fflush(stdout);
    fflush(stderr);
    if (exit_hook)
        exit_hook(code);
    exit(code);
}

void fb_fail_call(int code, const char *file, int line, const char *call, const char *detail)
{
    int err = errno;
    fprintf(stderr, "fabula: rank %d: %s:%d: %s failed: %s\n", my_rank, file, line, call,
            detail ? detail : strerror(err));
    fb_abort(code);
}

void fb_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("warning", fmt, ap);
    va_end(ap);
}

void *fb_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "malloc", "out of memory");
    return p;
}

void *fb_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "calloc", "out of memory");
    return p;
}

void *fb_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "realloc", "out of memory");
    return q;
}

char *fb_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = fb_malloc(n);
    memcpy(p, s, n);
    return p;
}
