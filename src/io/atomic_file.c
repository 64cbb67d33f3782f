/* Atomic whole-file replacement: temporary name, fsync, rename, fsync dir. */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

/* Removes the temporary file (best effort: we are already failing) and
 * reports the first error, which is the one the user needs. */
static _Noreturn void fail(const char *path, const char *tmp, const char *what, int err)
{
    if (tmp)
        unlink(tmp);
    fb_fatal(FB_EXIT_IO, "%s: %s: %s", path, what, strerror(err));
}

static void write_all(int fd, const char *path, const char *tmp, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            fail(path, tmp, "write", err);
        }
        p += w;
        n -= (size_t)w;
    }
}

/* The rename is only durable once the directory entry is on disk. */
static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = fb_strdup(".");
    else if (slash == path)
        dir = fb_strdup("/");
    else {
        size_t len = (size_t)(slash - path);
        dir = fb_malloc(len + 1);
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        free(dir);
        fail(path, NULL, "open of the parent directory for fsync", err);
    }
    /* Some file systems cannot fsync a directory (EINVAL); the rename is
     * then as durable as that file system makes it. */
    if (fsync(fd) < 0 && errno != EINVAL) {
        int err = errno;
        close(fd);
        free(dir);
        fail(path, NULL, "fsync of the parent directory", err);
    }
    free(dir);
    if (close(fd) < 0)
        fail(path, NULL, "close of the parent directory", errno);
}

void atomic_write_file(const char *path, const void *data, size_t n)
{
    size_t len = strlen(path) + 32;
    char *tmp = fb_malloc(len);
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        free(tmp);
        /* nothing was created, so nothing to remove */
        fail(path, NULL, "cannot create temporary file", err);
    }
    write_all(fd, path, tmp, data, n);
    if (fsync(fd) < 0) {
        int err = errno;
        close(fd);
        fail(path, tmp, "fsync", err);
    }
    if (close(fd) < 0)
        fail(path, tmp, "close", errno);
    if (rename(tmp, path) < 0)
        fail(path, tmp, "rename from temporary file", errno);
    free(tmp);
    sync_parent_dir(path);
}

/* mkdir of one prefix; an existing directory is success. */
static void mkdir_one(const char *full, const char *prefix)
{
    if (mkdir(prefix, 0755) == 0)
        return;
    int err = errno;
    struct stat st;
    if (err == EEXIST && stat(prefix, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return;
        err = ENOTDIR;
    }
    fb_fatal(FB_EXIT_IO, "%s: cannot create directory %s: %s", full, prefix, strerror(err));
}

void fs_mkdirs(const char *path)
{
    FB_ASSERT(path && path[0]);
    char *p = fb_strdup(path);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    /* each '/' after the first character ends a parent prefix */
    for (char *s = p + 1; *s; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = '\0';
        mkdir_one(path, p);
        *s = '/';
    }
    mkdir_one(path, p);
    free(p);
}
