/* Where a data file named in a config is found: as given (relative to the
 * working directory), or else in the installed data directory, so that the
 * default config's "inputs/sample.jsonl" works both in the source tree and
 * after `make install`. */
#ifndef FABULA_DATA_PATH_H
#define FABULA_DATA_PATH_H

/* A new string (free()): `path` itself if it exists; else, for a relative
 * path, FB_PKGDATADIR "/" path if that exists; else `path` unchanged, so
 * that opening it fails with a message naming what the user wrote. */
char *data_path_resolve(const char *path);

#endif
