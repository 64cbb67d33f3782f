#include "ckpt/ckpt_tensors.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "util/error.h"

typedef struct tensor_entry {
    char *name;
    int ndim;
    uint64_t dims[2];
} tensor_entry_t;

struct ckpt_tensors {
    char *path;
    hid_t file;
    ckpt_meta_t meta;
    tensor_entry_t *t;
    size_t n, max;
};

/* H5Literate callback: collects the names of /params, refusing any name no
 * writer produces (a damaged link table). */
static herr_t collect(hid_t group, const char *name, const H5L_info_t *info, void *op)
{
    (void)group;
    ckpt_tensors_t *c = op;
    size_t len = strnlen(name, CKPT_NAME_MAX + 1);
    if (info->type != H5L_TYPE_HARD || len == 0 || len > CKPT_NAME_MAX || c->n == c->max)
        return -1;
    c->t[c->n++].name = fb_strdup(name);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tensor_entry_t *)a)->name, ((const tensor_entry_t *)b)->name);
}

static hid_t open_dataset(const ckpt_tensors_t *c, size_t i)
{
    char ds[256];
    ckpt_dataset_path(ds, sizeof ds, CKPT_PARAMS, c->t[i].name);
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    hid_t d = h5_lookup(c->file, ds) > 0 ? H5Dopen2(c->file, ds, H5P_DEFAULT) : -1;
    ckpt_h5_quiet_end(&q);
    if (d < 0)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: dataset %s cannot be opened", c->path, ds);
    return d;
}

ckpt_tensors_t *ckpt_tensors_open(const char *path)
{
    char why[1024];
    int code = regular_file_check(path, why, sizeof why);
    if (code == FB_EXIT_IO || (!code && access(path, R_OK) != 0))
        fb_fatal(FB_EXIT_IO, "%s: cannot open the checkpoint: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    ckpt_tensors_t *c = fb_calloc(1, sizeof *c);
    c->path = fb_strdup(path);
    c->file = ckpt_open_read(path, 0, NULL);
    if (c->file < 0)
        fb_fatal(FB_EXIT_DATA, "%s: not a checkpoint: HDF5 cannot open it (truncated, or not an HDF5 file)", path);
    if (ckpt_meta_read(c->file, &c->meta, why, sizeof why) < 0)
        fb_fatal(FB_EXIT_DATA, "%s: damaged or not a checkpoint: %s", path, why);
    if (strcmp(c->meta.format, CKPT_FORMAT_NAME) != 0 || c->meta.version > CKPT_FORMAT_VERSION)
        fb_fatal(FB_EXIT_DATA, "%s: format '%s' version %lld: this fabula reads '%s' up to version %d", path,
                 c->meta.format, c->meta.version, CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION);
    if (strcmp(c->meta.checksum_name, CKPT_CHECKSUM_NAME) != 0)
        fb_fatal(FB_EXIT_DATA, "%s: checksum '%s': this fabula checks '%s'", path, c->meta.checksum_name,
                 CKPT_CHECKSUM_NAME);
    if (c->meta.ntensors <= 0 || c->meta.ntensors > 1000000)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: num_tensors %lld", path, c->meta.ntensors);
    c->max = (size_t)c->meta.ntensors;
    c->t = fb_calloc(c->max, sizeof *c->t);
    const char *group = ckpt_kind_group(CKPT_PARAMS);
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    herr_t rc = h5_lookup(c->file, group) > 0
                    ? H5Literate_by_name(c->file, group, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, collect, c, H5P_DEFAULT)
                    : -1;
    ckpt_h5_quiet_end(&q);
    if (rc < 0 || c->n != c->max)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: the table of %s cannot be read or has %zu of %lld tensors",
                 path, group, c->n, c->meta.ntensors);
    qsort(c->t, c->n, sizeof *c->t, by_name);
    for (size_t i = 0; i < c->n; i++) {
        hid_t d = open_dataset(c, i);
        hid_t s = H5Dget_space(d);
        hsize_t dims[2] = {0, 0};
        int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
        int ok = nd >= 1 && nd <= 2 && H5Sget_simple_extent_dims(s, dims, NULL) >= 0 && dims[0] > 0 &&
                 (nd == 1 || dims[1] > 0);
        if (nd == 1)
            dims[1] = 1;
        /* each tensor is read whole into memory: its extent must not wrap
         * and must be what the file stores */
        ckpt_h5_quiet_begin(&q);
        ok = ok && dims[0] <= SIZE_MAX / dims[1] && h5_dataset_backs(d, (size_t)(dims[0] * dims[1])) == 1;
        ckpt_h5_quiet_end(&q);
        if (s >= 0)
            H5Sclose(s);
        H5Dclose(d);
        if (!ok)
            fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: tensor %s has no valid shape", path, c->t[i].name);
        c->t[i].ndim = nd;
        c->t[i].dims[0] = dims[0];
        c->t[i].dims[1] = nd == 2 ? dims[1] : 1;
    }
    return c;
}

void ckpt_tensors_close(ckpt_tensors_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->t[i].name);
    free(c->t);
    ckpt_meta_free(&c->meta);
    H5Fclose(c->file);
    free(c->path);
    free(c);
}

const char *ckpt_tensors_config(const ckpt_tensors_t *c) { return c->meta.config; }
long long ckpt_tensors_step(const ckpt_tensors_t *c) { return c->meta.step; }
size_t ckpt_tensors_count(const ckpt_tensors_t *c) { return c->n; }
const char *ckpt_tensors_name(const ckpt_tensors_t *c, size_t i) { return c->t[i].name; }

int ckpt_tensors_shape(const ckpt_tensors_t *c, size_t i, uint64_t dims[2])
{
    dims[0] = c->t[i].dims[0];
    dims[1] = c->t[i].dims[1];
    return c->t[i].ndim;
}

size_t ckpt_tensors_numel(const ckpt_tensors_t *c, size_t i) { return (size_t)(c->t[i].dims[0] * c->t[i].dims[1]); }

long ckpt_tensors_find(const ckpt_tensors_t *c, const char *name)
{
    tensor_entry_t key = {.name = (char *)name};
    const tensor_entry_t *e = bsearch(&key, c->t, c->n, sizeof *c->t, by_name);
    return e ? (long)(e - c->t) : -1;
}

void ckpt_tensors_read(const ckpt_tensors_t *c, size_t i, float *out)
{
    hid_t d = open_dataset(c, i);
    uint64_t stored = 0;
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    int no_sum = ckpt_attr_read_u64(d, "checksum", &stored) < 0;
    herr_t rc = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    ckpt_h5_quiet_end(&q);
    H5Dclose(d);
    if (rc < 0)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: tensor %s cannot be read", c->path, c->t[i].name);
    if (no_sum)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: tensor %s has no checksum", c->path, c->t[i].name);
    uint64_t sum = ckpt_checksum(out, ckpt_tensors_numel(c, i), 0);
    if (sum != stored)
        fb_fatal(FB_EXIT_DATA, "%s: damaged checkpoint: tensor %s: checksum 0x%016llx, stored 0x%016llx", c->path,
                 c->t[i].name, (unsigned long long)sum, (unsigned long long)stored);
}
