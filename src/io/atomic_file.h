/* Whole-file writes that are never seen half-done, and mkdir -p.
 *
 * Any failure is a user-visible I/O error: fb_fatal(FB_EXIT_IO) naming the
 * path, the step that failed and the system's reason.
 */
#ifndef FABULA_IO_ATOMIC_FILE_H
#define FABULA_IO_ATOMIC_FILE_H

#include <stddef.h>

/* Writes `n` bytes to "<path>.tmp.<pid>", fsyncs it, renames it over `path`
 * and fsyncs the directory, so after a crash `path` holds either the old or
 * the new content. On failure the temporary file is removed. */
void atomic_write_file(const char *path, const void *data, size_t n);

/* Creates `path` and its missing parents (mode 0755); existing directories
 * are fine, an existing non-directory is an error. */
void fs_mkdirs(const char *path);

#endif
