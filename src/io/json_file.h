/* A JSON file read whole with duplicate keys refused, for the files
 * `fabula validate` reads (loss curves, bands). */
#ifndef FABULA_IO_JSON_FILE_H
#define FABULA_IO_JSON_FILE_H

#include <jansson.h>
#include <stddef.h>

/* The root of `path`, or NULL with the problem in err, naming the file as
 * "WHAT PATH": not a regular file, unreadable ("cannot read WHAT PATH"), or
 * not JSON (with the line and column). */
json_t *json_file_load(const char *path, const char *what, char *err, size_t errcap);

#endif
