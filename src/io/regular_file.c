/* Regular files only (io/regular_file.h). */
#include "io/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "of an unknown kind";
}

static int not_regular(const char *path, mode_t m, char *why, size_t cap)
{
    snprintf(why, cap, "%s: not a regular file (%s)", path, kind_of(m));
    return FB_EXIT_DATA;
}

static int cannot_open(const char *path, char *why, size_t cap)
{
    int e = errno;
    snprintf(why, cap, "%s: cannot open: %s", path, strerror(e));
    errno = e;
    return FB_EXIT_IO;
}

int regular_file_check(const char *path, char *why, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return cannot_open(path, why, cap);
    return S_ISREG(st.st_mode) ? 0 : not_regular(path, st.st_mode, why, cap);
}

int regular_file_open(const char *path, int *fd, char *why, size_t cap)
{
    *fd = -1;
    int code = regular_file_check(path, why, cap);
    if (code)
        return code;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return cannot_open(path, why, cap);
    struct stat st;
    if (fstat(f, &st) != 0) {
        code = cannot_open(path, why, cap);
        close(f);
        return code;
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return not_regular(path, st.st_mode, why, cap);
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        code = cannot_open(path, why, cap);
        close(f);
        return code;
    }
    *fd = f;
    return 0;
}

int regular_file_fopen(const char *path, FILE **f, char *why, size_t cap)
{
    *f = NULL;
    int fd;
    int code = regular_file_open(path, &fd, why, cap);
    if (code)
        return code;
    *f = fdopen(fd, "rb");
    if (!*f) {
        code = cannot_open(path, why, cap);
        close(fd);
    }
    return code;
}
