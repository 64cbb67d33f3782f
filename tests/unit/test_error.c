/* util/error: fb_catch turns a fatal error into a code and a message (the
 * way prep shares rank 0's tokenizer failure with every rank), and a fatal
 * error never reaches the log as a bare "fabula: error: ". */
#include <stdio.h>
#include <string.h>

#include "util/error.h"

#include "testlib.h"

static int after_fatal;
static void *leaked;

static void dies_with_usage(void *arg)
{
    fb_fatal(FB_EXIT_USAGE, "tokenizer %s: bad", (const char *)arg);
    after_fatal = 1;
}

static void call_fails(void *arg)
{
    (void)arg;
    leaked = fb_malloc(16);
    errno = ENOSPC;
    CHECK_SYS(-1);
    after_fatal = 1;
}

static void returns(void *arg) { *(int *)arg = 7; }

static void nested(void *arg)
{
    char msg[64];
    fb_catch(returns, arg, msg, sizeof msg);
}

static void test_catch(void)
{
    char msg[128];
    int code = fb_catch(dies_with_usage, "gpt2.json", msg, sizeof msg);
    EXPECT(code == FB_EXIT_USAGE, "code %d", code);
    EXPECT(!strcmp(msg, "tokenizer gpt2.json: bad"), "message '%s'", msg);
    EXPECT(!after_fatal, "fn went on after fb_fatal");

    code = fb_catch(call_fails, NULL, msg, sizeof msg);
    EXPECT(code == FB_EXIT_IO, "code %d", code);
    EXPECT(strstr(msg, "CHECK_SYS") == NULL && strstr(msg, "-1 failed") && strstr(msg, strerror(ENOSPC)),
           "message '%s'", msg);
    EXPECT(!after_fatal, "fn went on after a failed call");
    free(leaked);

    int v = 0;
    code = fb_catch(returns, &v, msg, sizeof msg);
    EXPECT(code == 0 && v == 7 && msg[0] == '\0', "code %d v %d msg '%s'", code, v, msg);

    /* a short buffer keeps the start of the message */
    char tiny[10];
    code = fb_catch(dies_with_usage, "x", tiny, sizeof tiny);
    EXPECT(code == FB_EXIT_USAGE && !strcmp(tiny, "tokenizer"), "code %d message '%s'", code, tiny);
}

/* After fb_catch returns, fb_fatal ends the process again (the catch is
 * not left armed), and a nested fb_catch is a bug, not a silent overwrite. */
static void fatal_after_catch(const void *arg)
{
    (void)arg;
    char msg[32];
    int v;
    fb_catch(returns, &v, msg, sizeof msg);
    fb_fatal(FB_EXIT_DATA, "plain fatal");
}

static void nested_catch(const void *arg)
{
    (void)arg;
    char msg[128];
    int v;
    fb_catch(nested, &v, msg, sizeof msg);
    fprintf(stderr, "outer caught: %s\n", msg);
    exit(0);
}

static void empty_fatal(const void *arg) { fb_fatal(FB_EXIT_IO, "%s", (const char *)arg); }
static void empty_fatal_all(const void *arg) { fb_fatal_all(FB_EXIT_USAGE, "%s", (const char *)arg); }

static void test_exits(void)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "test_error_%ld.err", (long)getpid());

    int st = testlib_child_exit(fatal_after_catch, NULL, path);
    testlib_read_text(path, text, sizeof text);
    EXPECT(st == FB_EXIT_DATA && strstr(text, "fabula: error: plain fatal"), "exit %d, stderr '%s'", st, text);

    st = testlib_child_exit(nested_catch, NULL, path);
    testlib_read_text(path, text, sizeof text);
    EXPECT(st == 0 && strstr(text, "outer caught:") && strstr(text, "assertion failed"), "exit %d, stderr '%s'", st,
           text);

    /* the bare prefix the issue saw: an empty reason from a library */
    const char *empties[] = {"", " \n"};
    for (int i = 0; i < 2; i++) {
        st = testlib_child_exit(empty_fatal, empties[i], path);
        testlib_read_text(path, text, sizeof text);
        EXPECT(st == FB_EXIT_IO && strstr(text, "fabula: error: failed without a message (exit 4, I/O error)"),
               "case %d: exit %d, stderr '%s'", i, st, text);
        st = testlib_child_exit(empty_fatal_all, empties[i], path);
        testlib_read_text(path, text, sizeof text);
        EXPECT(st == FB_EXIT_USAGE && strstr(text, "failed without a message (exit 2, usage or config error)"),
               "case %d: exit %d, stderr '%s'", i, st, text);
    }

    /* a long message is printed whole */
    static char longmsg[20000];
    memset(longmsg, 'a', sizeof longmsg - 2);
    longmsg[sizeof longmsg - 2] = 'Z';
    st = testlib_child_exit(empty_fatal, longmsg, path);
    static char big[sizeof longmsg + 256];
    testlib_read_text(path, big, sizeof big);
    EXPECT(st == FB_EXIT_IO && strstr(big, "aZ\n"), "exit %d, %zu bytes", st, strlen(big));
    remove(path);
}

int main(void)
{
    test_catch();
    test_exits();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
