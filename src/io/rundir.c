/* Run directory: config.json (atomic) and metrics.jsonl (line-appended). */
#include "io/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "util/append_file.h"
#include "util/error.h"

struct metrics {
    fb_append_t *f;
};

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = fb_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void rundir_prepare(const char *dir, const char *effective_json)
{
    fs_mkdirs(dir);
    char *path = join_path(dir, "config.json");
    size_t n = strlen(effective_json);
    /* end the file with a newline, as text files should */
    if (n == 0 || effective_json[n - 1] != '\n') {
        char *text = fb_malloc(n + 1);
        memcpy(text, effective_json, n);
        text[n] = '\n';
        atomic_write_file(path, text, n + 1);
        free(text);
    } else {
        atomic_write_file(path, effective_json, n);
    }
    free(path);
}

/* The lock file's descriptor, open until the process ends: closing any
 * descriptor of the file would drop a POSIX record lock. */
static int lock_fd = -1;

int rundir_lock(const char *dir, char *holder, size_t holder_size)
{
    if (lock_fd >= 0)
        return 1;
    fs_mkdirs(dir);
    char *path = join_path(dir, ".lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot open the run directory's lock file: %s", path, strerror(errno));
    /* fcntl rather than flock: fcntl locks also hold across nodes on the
     * network file systems (NFS, Lustre) run directories live on */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        if (errno != EACCES && errno != EAGAIN)
            fb_fatal(FB_EXIT_IO, "%s: cannot lock: %s", path, strerror(errno));
        ssize_t n = holder_size > 0 ? pread(fd, holder, holder_size - 1, 0) : 0;
        if (holder_size > 0) {
            n = n < 0 ? 0 : n;
            while (n > 0 && (holder[n - 1] == '\n' || holder[n - 1] == '\0'))
                n--;
            holder[n] = '\0';
            if (n == 0)
                snprintf(holder, holder_size, "an unknown process");
        }
        close(fd);
        free(path);
        return 0;
    }
    char host[256] = "unknown host";
    if (gethostname(host, sizeof host - 1) < 0)
        snprintf(host, sizeof host, "unknown host");
    host[sizeof host - 1] = '\0';
    char text[320];
    int len = snprintf(text, sizeof text, "host %s pid %ld\n", host, (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)len, 0) != len)
        fb_fatal(FB_EXIT_IO, "%s: cannot write the lock holder: %s", path, strerror(errno));
    lock_fd = fd;
    free(path);
    return 1;
}

metrics_t *metrics_open(const char *dir)
{
    metrics_t *m = fb_calloc(1, sizeof *m);
    char *path = join_path(dir, "metrics.jsonl");
    m->f = fb_append_open(path);
    free(path);
    return m;
}

void metrics_write(metrics_t *m, json_t *record)
{
    FB_ASSERT(m && record);
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9);
    size_t n = json_dumpb(record, NULL, 0, flags);
    if (n == 0)
        fb_fatal(FB_EXIT_INTERNAL, "%s: cannot serialise a metrics record", fb_append_path(m->f));
    /* one write per line, so a concurrent reader sees whole lines and a
     * full disk leaves only whole ones */
    char *line = fb_malloc(n + 1);
    size_t written = json_dumpb(record, line, n, flags);
    FB_ASSERT(written == n);
    line[n] = '\n';
    fb_append_record(m->f, line, n + 1);
    free(line);
}

void metrics_close(metrics_t *m)
{
    if (!m)
        return;
    fb_append_close(m->f);
    free(m);
}
