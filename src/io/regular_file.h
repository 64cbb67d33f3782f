/* Opening a file that fabula reads as data (weights, configs, tokenizers,
 * corpora, checkpoints, novels, id lists) only when it is a regular file.
 *
 * A FIFO opened for reading blocks until some process writes to it, a
 * character device such as /dev/zero never ends, and a directory fails only
 * at the first read: none of them is input. So the type is checked by name
 * before anything is opened (opening some devices has effects of its own),
 * and again on the descriptor, opened with O_NONBLOCK so that a FIFO put in
 * the file's place meanwhile cannot block the open either.
 *
 * The functions return 0, or an exit code with why[cap] saying what, for
 * the caller to report as its own message or through fb_fatal:
 *  - FB_EXIT_DATA: "PATH: not a regular file (a FIFO)" (a directory, a
 *    character device, ...): the input named is not a file;
 *  - FB_EXIT_IO: "PATH: cannot open: REASON", with errno left as the
 *    failed call set it (a caller keeping its own wording uses strerror). */
#ifndef FABULA_IO_REGULAR_FILE_H
#define FABULA_IO_REGULAR_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Opens `path` read-only (O_CLOEXEC, reads blocking as usual) into *fd. */
int regular_file_open(const char *path, int *fd, char *why, size_t cap);

/* regular_file_open as a stdio stream ("rb") in *f. */
int regular_file_fopen(const char *path, FILE **f, char *why, size_t cap);

/* For a reader that opens by name itself (HDF5's H5Fopen): whether `path`
 * names a regular file (symbolic links followed), without opening it. */
int regular_file_check(const char *path, char *why, size_t cap);

#endif
