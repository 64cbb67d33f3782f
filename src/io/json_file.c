#include "io/json_file.h"

#include <stdio.h>

#include "io/regular_file.h"
#include "util/error.h"

json_t *json_file_load(const char *path, const char *what, char *err, size_t cap)
{
    char why[1024];
    if (regular_file_check(path, why, sizeof why) == FB_EXIT_DATA) {
        snprintf(err, cap, "%s %s", what, why);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (root)
        return root;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, cap, "cannot read %s %s", what, path);
        return NULL;
    }
    fclose(f);
    snprintf(err, cap, "%s %s: not JSON: %s at line %d column %d", what, path, je.text, je.line, je.column);
    return NULL;
}
