/* Append-only record files (metrics.jsonl, TensorBoard events, CSV
 * monitor rows, the job log) whose every failure is seen.
 *
 * A record goes out in write(2) calls, never through a stdio buffer: with a
 * line-buffered FILE, glibc reports a flush that failed inside fwrite only
 * through ferror(), so a full disk passed unseen. A record that cannot be
 * written whole is cut off again (ftruncate to where it began), so the file
 * holds only whole records, then the job ends with exit 4 naming the file.
 */
#ifndef FABULA_UTIL_APPEND_FILE_H
#define FABULA_UTIL_APPEND_FILE_H

#include <stddef.h>

typedef struct fb_append fb_append_t;

/* Opens `path` for appending, creating it (0644). A failure is fatal
 * (exit 4, naming the path). */
fb_append_t *fb_append_open(const char *path);
/* The same for a file that must not exist yet (O_EXCL). */
fb_append_t *fb_append_create(const char *path);

/* Appends the `n` bytes as one record; on failure the file is cut back to
 * its length before the call and the job ends (exit 4, the path, the
 * system's reason). */
void fb_append_record(fb_append_t *a, const void *data, size_t n);

/* As fb_append_record, but returns the errno of a failure (0 on success)
 * instead of ending the job: for a record written while the job is
 * already failing. The file is cut back all the same. */
int fb_append_record_try(fb_append_t *a, const void *data, size_t n);

/* fsync: the records so far survive a crash of the machine. Fatal on
 * failure (exit 4). */
void fb_append_sync(fb_append_t *a);

/* The file's length: where the next record begins. */
long long fb_append_size(const fb_append_t *a);
const char *fb_append_path(const fb_append_t *a);

/* Closes; NULL is ignored. Fatal when close reports a failed write. */
void fb_append_close(fb_append_t *a);

#endif
