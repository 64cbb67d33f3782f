#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/abort.h"

static int mpi_active;
static int my_rank;

void fb_error_set_mpi_active(int active, int rank)
{
    mpi_active = active;
    my_rank = rank;
}

int fb_error_rank(void) { return my_rank; }

static _Noreturn void terminate(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (mpi_active)
        parallel_abort(code);
    exit(code);
}

void fb_fatal(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fabula: error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    terminate(code);
}

void fb_fatal_all(int code, const char *fmt, ...)
{
    if (my_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "fabula: error: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    fflush(stdout);
    fflush(stderr);
    if (mpi_active)
        parallel_exit(code);
    exit(code);
}

void fb_fail_call(int code, const char *file, int line, const char *call, const char *detail)
{
    int err = errno;
    fprintf(stderr, "fabula: rank %d: %s:%d: %s failed: %s\n", my_rank, file, line, call,
            detail ? detail : strerror(err));
    terminate(code);
}

void fb_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fabula: warning: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
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
