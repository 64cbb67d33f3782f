/* Append-only record files: write(2) per record, torn records cut off. */
#include "util/append_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

struct fb_append {
    int fd;
    char *path;
    /* this process is the file's only writer (the run directory's lock), so
     * the length it tracks is where the next record lands */
    long long size;
    int cut_err; /* errno of a failed cut-off: a torn record is left */
};

static _Noreturn void not_regular(const char *path)
{
    fb_fatal(FB_EXIT_IO, "%s: not a regular file: records are only appended to regular files", path);
}

static fb_append_t *open_flags(const char *path, int excl)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        not_regular(path);
    /* O_NONBLOCK: a FIFO put in the file's place meanwhile fails the open
     * (no reader) or is refused below, instead of blocking it */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | (excl ? O_EXCL : 0), 0644);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot %s: %s", path, excl ? "create" : "open for appending", strerror(errno));
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        fb_fatal(FB_EXIT_IO, "%s: fstat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        not_regular(path);
    }
    fb_append_t *a = fb_calloc(1, sizeof *a);
    a->fd = fd;
    a->path = fb_strdup(path);
    a->size = (long long)st.st_size;
    return a;
}

fb_append_t *fb_append_open(const char *path) { return open_flags(path, 0); }
fb_append_t *fb_append_create(const char *path) { return open_flags(path, 1); }

int fb_append_record_try(fb_append_t *a, const void *data, size_t n)
{
    const char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(a->fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* write(2) returns 0 only for n == 0; taken as "no space" */
            int err = w < 0 ? errno : ENOSPC;
            /* the part that went out would be a torn record: cut it off, so
             * every record the file holds is whole */
            a->cut_err = left < n && ftruncate(a->fd, (off_t)a->size) < 0 ? errno : 0;
            return err;
        }
        p += w;
        left -= (size_t)w;
    }
    a->size += (long long)n;
    return 0;
}

void fb_append_record(fb_append_t *a, const void *data, size_t n)
{
    int err = fb_append_record_try(a, data, n);
    if (err && a->cut_err)
        fb_fatal(FB_EXIT_IO, "%s: write: %s; the torn record after byte %lld could not be cut off: %s", a->path,
                 strerror(err), a->size, strerror(a->cut_err));
    if (err)
        fb_fatal(FB_EXIT_IO, "%s: write: %s (the records before this one are intact)", a->path, strerror(err));
}

void fb_append_sync(fb_append_t *a)
{
    if (fsync(a->fd) < 0 && errno != EINVAL)
        fb_fatal(FB_EXIT_IO, "%s: fsync: %s", a->path, strerror(errno));
}

long long fb_append_size(const fb_append_t *a) { return a->size; }
const char *fb_append_path(const fb_append_t *a) { return a->path; }

void fb_append_close(fb_append_t *a)
{
    if (!a)
        return;
    /* a network file system may report a failed write only here */
    if (close(a->fd) < 0 && errno != EINTR)
        fb_fatal(FB_EXIT_IO, "%s: close: %s", a->path, strerror(errno));
    free(a->path);
    free(a);
}
