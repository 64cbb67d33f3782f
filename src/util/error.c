#include "util/error.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int my_rank;
static void (*abort_hook)(int code);
static void (*exit_hook)(int code);
static void (*abort_cleanup)(void);
static void (*fatal_note)(int code, const char *msg, int all);

/* fb_catch's landing point and message buffer, while it runs fn. */
static jmp_buf *catch_env;
static char *catch_msg;
static size_t catch_cap;
static int catch_code;

void fb_set_abort_hook(void (*hook)(int code)) { abort_hook = hook; }
void fb_set_exit_hook(void (*hook)(int code)) { exit_hook = hook; }
void fb_set_abort_cleanup(void (*cleanup)(void)) { abort_cleanup = cleanup; }
void fb_set_fatal_note(void (*note)(int code, const char *msg, int all)) { fatal_note = note; }

void fb_error_set_rank(int rank) { my_rank = rank; }
int fb_error_rank(void) { return my_rank; }

static const char *code_meaning(int code)
{
    switch (code) {
    case FB_EXIT_USAGE: return "usage or config";
    case FB_EXIT_DATA: return "input data";
    case FB_EXIT_IO: return "I/O";
    case FB_EXIT_DIVERGED: return "diverged";
    case FB_EXIT_PREEMPTED: return "preempted";
    case FB_EXIT_HUNG: return "hang";
    default: return "internal";
    }
}

/* Hands the message to the fatal note, once: a note that fails itself
 * (the disk it writes to is full) ends the process without a second one. */
static void note_fatal(int code, int all, const char *fmt, va_list ap)
{
    void (*note)(int, const char *, int) = fatal_note;
    fatal_note = NULL;
    if (!note)
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    note(code, msg, all);
}

static void note_fatal_fmt(int code, int all, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_fatal_fmt(int code, int all, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    note_fatal(code, all, fmt, ap);
    va_end(ap);
}

void fb_abort(int code)
{
    /* a caller that printed its own message: the note says where to look */
    note_fatal_fmt(code, 0, "failed (exit %d, %s error): the message is in the job's error output", code,
                   code_meaning(code));
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

void fb_exit_now(int code, const char *msg)
{
    note_fatal_fmt(code, 0, "%s", msg);
    fflush(stdout);
    fflush(stderr);
    void (*cleanup)(void) = abort_cleanup;
    abort_cleanup = NULL;
    if (cleanup)
        cleanup();
    if (abort_hook)
        abort_hook(code);
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    _Exit(code);
}

/* "fabula: <kind>: <message>" on stderr. A fatal error never reaches the
 * log as a bare prefix: an empty message (a library that gave no reason)
 * still says what kind of failure ended the job. */
static void say(const char *kind, int code, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char small[256];
    char *buf = n >= 0 && (size_t)n < sizeof small ? small : malloc(n > 0 ? (size_t)n + 1 : 1);
    if (!buf || n < 0) {
        /* no memory for the message: its format is the best left to say */
        fprintf(stderr, "fabula: %s: %s\n", kind, fmt);
        free(buf == small ? NULL : buf);
        return;
    }
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    const char *p = buf;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    if (*p || code < 0)
        fprintf(stderr, "fabula: %s: %s\n", kind, buf);
    else
        fprintf(stderr, "fabula: %s: failed without a message (exit %d, %s error); please report this as a bug\n",
                kind, code, code_meaning(code));
    if (buf != small)
        free(buf);
}

/* A fatal error inside fb_catch: its message is kept, fn is left. */
static _Noreturn void caught(int code, const char *fmt, va_list ap)
{
    jmp_buf *env = catch_env;
    catch_env = NULL;
    vsnprintf(catch_msg, catch_cap, fmt, ap);
    catch_code = code > 0 ? code : FB_EXIT_INTERNAL;
    longjmp(*env, 1);
}

static _Noreturn void caught_fmt(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void caught_fmt(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    caught(code, fmt, ap);
}

int fb_catch(void (*fn)(void *arg), void *arg, char *msg, size_t cap)
{
    FB_ASSERT(!catch_env && cap > 0);
    jmp_buf env;
    msg[0] = '\0';
    catch_msg = msg;
    catch_cap = cap;
    if (setjmp(env) == 0) {
        catch_env = &env;
        fn(arg);
        catch_env = NULL;
        return 0;
    }
    if (!msg[0])
        snprintf(msg, cap, "failed without a message (exit %d); please report this as a bug", catch_code);
    return catch_code;
}

void fb_fatal(int code, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    if (catch_env)
        caught(code, fmt, ap);
    va_copy(aq, ap);
    say("error", code, fmt, ap);
    note_fatal(code, 0, fmt, aq);
    va_end(aq);
    va_end(ap);
    fb_abort(code);
}

void fb_fatal_all(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (my_rank == 0) {
        va_list aq;
        va_copy(aq, ap);
        say("error", code, fmt, aq);
        va_end(aq);
    }
    note_fatal(code, 1, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    if (exit_hook)
        exit_hook(code);
    exit(code);
}

void fb_fail_call(int code, const char *file, int line, const char *call, const char *detail)
{
    int err = errno;
    if (catch_env)
        caught_fmt(code, "rank %d: %s:%d: %s failed: %s", my_rank, file, line, call, detail ? detail : strerror(err));
    fprintf(stderr, "fabula: rank %d: %s:%d: %s failed: %s\n", my_rank, file, line, call,
            detail ? detail : strerror(err));
    note_fatal_fmt(code, 0, "rank %d: %s:%d: %s failed: %s", my_rank, file, line, call, detail ? detail : strerror(err));
    fb_abort(code);
}

void fb_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("warning", -1, fmt, ap);
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
