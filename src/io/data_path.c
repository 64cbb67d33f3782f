#include "io/data_path.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

#ifndef FB_PKGDATADIR
#error "FB_PKGDATADIR must be defined by the build (Makefile.am, libfabula_a_CPPFLAGS)"
#endif

char *data_path_resolve(const char *path)
{
    FB_ASSERT(path != NULL);
    if (access(path, F_OK) == 0 || path[0] == '/' || path[0] == '\0')
        return fb_strdup(path);
    size_t n = strlen(FB_PKGDATADIR) + 1 + strlen(path) + 1;
    char *installed = fb_malloc(n);
    strcpy(installed, FB_PKGDATADIR);
    strcat(installed, "/");
    strcat(installed, path);
    if (access(installed, F_OK) == 0)
        return installed;
    free(installed);
    return fb_strdup(path);
}
