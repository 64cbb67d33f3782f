/* Whole-dataset HDF5 reads and writes with checked calls and messages that
 * name the file and the dataset. */
#include "io/h5tensor.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "util/error.h"

/* ------------------------------------------------------------ names */

/* The file an object belongs to, for messages. Caller frees. */
static char *file_name_of(hid_t obj)
{
    ssize_t n = H5Fget_name(obj, NULL, 0);
    CHECK_H5(n);
    char *s = fb_malloc((size_t)n + 1);
    CHECK_H5(H5Fget_name(obj, s, (size_t)n + 1));
    return s;
}

/* The path of an object inside its file ("/" for the file itself). */
static char *object_path_of(hid_t obj)
{
    ssize_t n = H5Iget_name(obj, NULL, 0);
    CHECK_H5(n);
    char *s = fb_malloc((size_t)n + 1);
    CHECK_H5(H5Iget_name(obj, s, (size_t)n + 1));
    if (n == 0)
        strcpy(s, "/");
    return s;
}

/* A failed call while reading a file HDF5 has opened: its metadata (or a
 * chunk) cannot be read, so the file is damaged. Exit 3 naming it, as for
 * any other bad input, not a failed library call. */
static _Noreturn void damaged(hid_t obj)
{
    ssize_t n = H5Fget_name(obj, NULL, 0);
    char name[4096] = "an HDF5 file";
    if (n > 0 && (size_t)n < sizeof name)
        H5Fget_name(obj, name, sizeof name);
    fb_fatal(FB_EXIT_DATA, "%s: HDF5 cannot read its metadata: the file is damaged", name);
}

#define READ_H5(call, obj)                                                                                        \
    do {                                                                                                           \
        if ((long long)(call) < 0)                                                                                 \
            damaged(obj);                                                                                          \
    } while (0)

/* ------------------------------------------------------------ files */

hid_t h5_open_read(const char *path)
{
    /* H5Fopen opens by name: a FIFO there would block it for good */
    char why[1024];
    int code = regular_file_check(path, why, sizeof why);
    if (code == FB_EXIT_IO || (!code && access(path, R_OK) != 0))
        fb_fatal(FB_EXIT_IO, "%s: cannot open: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    /* The file is readable, so a failure here is about its content: say that
     * plainly instead of printing HDF5's stack. */
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    if (f < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot open as HDF5 (not an HDF5 file, damaged, or locked by a writer)", path);
    return f;
}

hid_t h5_create(const char *path)
{
    /* The 1.8 object-header format stores attributes larger than 64 KiB
     * (a whole config, say) in dense storage instead of failing. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_H5(fapl);
    CHECK_H5(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST));
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK_H5(H5Pclose(fapl));
    if (f < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot create HDF5 file (see the HDF5 error stack above)", path);
    return f;
}

void h5_close(hid_t file)
{
    CHECK_H5(H5Fclose(file));
}

/* ------------------------------------------------------------ lookup */

int h5_lookup(hid_t file, const char *path)
{
    char *p = fb_strdup(path);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    if (len == 0 || strcmp(p, "/") == 0 || strcmp(p, ".") == 0) {
        free(p);
        return 1;
    }
    H5E_auto2_t func;
    void *client;
    CHECK_H5(H5Eget_auto2(H5E_DEFAULT, &func, &client));
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    /* H5Lexists fails (rather than returning 0) when a parent is missing,
     * so walk the prefixes: "/a", "/a/b", ..., each but the last a group. */
    int found = 1;
    for (size_t i = 1; i <= len && found == 1; i++) {
        if (i < len && (p[i] != '/' || p[i - 1] == '/'))
            continue;
        char saved = p[i];
        p[i] = '\0';
        htri_t e = H5Lexists(file, p, H5P_DEFAULT);
        if (e < 0) {
            found = -1;
        } else if (!e) {
            found = 0;
        } else if (i < len) {
            hid_t o = H5Oopen(file, p, H5P_DEFAULT);
            H5I_type_t t = o >= 0 ? H5Iget_type(o) : H5I_BADID;
            if (o >= 0 && H5Oclose(o) < 0)
                t = H5I_BADID;
            found = t == H5I_GROUP ? 1 : t == H5I_BADID ? -1 : 0;
        }
        p[i] = saved;
    }
    CHECK_H5(H5Eset_auto2(H5E_DEFAULT, func, client));
    free(p);
    return found;
}

int h5_exists(hid_t file, const char *path)
{
    int found = h5_lookup(file, path);
    if (found < 0) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_DATA, "%s: the HDF5 metadata on the way to %s cannot be read (damaged file)", fname, path);
    }
    return found;
}

/* Opens `path` as a dataset, or ends the run with a message naming it. */
static hid_t open_dataset(hid_t file, const char *path)
{
    if (!h5_exists(file, path)) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_DATA, "%s: no dataset %s", fname, path);
    }
    hid_t o = H5Oopen(file, path, H5P_DEFAULT);
    READ_H5(o, file);
    H5I_type_t t = H5Iget_type(o);
    READ_H5(t, file);
    if (t != H5I_DATASET) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_DATA, "%s: %s is not a dataset", fname, path);
    }
    return o;
}

static size_t shape_of(hid_t ds, const char *path, int *ndim, long long *dims)
{
    hid_t sp = H5Dget_space(ds);
    READ_H5(sp, ds);
    H5S_class_t cls = H5Sget_simple_extent_type(sp);
    READ_H5(cls, ds);
    int nd = H5Sget_simple_extent_ndims(sp);
    READ_H5(nd, ds);
    if (nd > H5_MAX_RANK) {
        char *fname = file_name_of(ds);
        fb_fatal(FB_EXIT_DATA, "%s: dataset %s has rank %d, at most %d supported", fname, path, nd,
                 H5_MAX_RANK);
    }
    hsize_t hd[H5_MAX_RANK];
    READ_H5(H5Sget_simple_extent_dims(sp, hd, NULL), ds);
    READ_H5(H5Sclose(sp), ds);
    size_t numel = cls == H5S_NULL ? 0 : 1;
    int wraps = 0;
    for (int i = 0; i < nd; i++) {
        /* a damaged or hostile dataspace must not wrap to a small count */
        wraps |= hd[i] > (hsize_t)LLONG_MAX || (hd[i] && numel > SIZE_MAX / (size_t)hd[i]);
        numel *= (size_t)hd[i];
        if (dims)
            dims[i] = (long long)hd[i];
    }
    if (wraps) {
        char *fname = file_name_of(ds);
        fb_fatal(FB_EXIT_DATA, "%s: dataset %s has an extent past 2^64 elements (damaged file)", fname, path);
    }
    if (ndim)
        *ndim = nd;
    return numel;
}

size_t h5_dataset_numel(hid_t file, const char *path, int *ndim, long long dims[H5_MAX_RANK])
{
    hid_t ds = open_dataset(file, path);
    size_t n = shape_of(ds, path, ndim, dims);
    READ_H5(H5Dclose(ds), file);
    return n;
}

int h5_dataset_backs(hid_t ds, size_t numel)
{
    hid_t ft = H5Dget_type(ds), dcpl = H5Dget_create_plist(ds);
    const size_t es = ft >= 0 ? H5Tget_size(ft) : 0;
    const int nfilters = dcpl >= 0 ? H5Pget_nfilters(dcpl) : -1;
    const hsize_t stored = H5Dget_storage_size(ds);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ft >= 0)
        H5Tclose(ft);
    if (es == 0 || nfilters < 0)
        return -1;
    /* in long double: numel x es may pass 2^64 */
    const long double need = (long double)numel * (long double)es;
    return need <= (long double)stored * (nfilters > 0 ? H5_MAX_EXPANSION : 1);
}

size_t h5_dataset_numel_stored(hid_t file, const char *path)
{
    hid_t ds = open_dataset(file, path);
    size_t n = shape_of(ds, path, NULL, NULL);
    int backed = h5_dataset_backs(ds, n);
    hid_t ft = H5Dget_type(ds);
    const size_t es = ft >= 0 ? H5Tget_size(ft) : 0;
    const hsize_t stored = H5Dget_storage_size(ds);
    if (ft >= 0)
        READ_H5(H5Tclose(ft), file);
    READ_H5(H5Dclose(ds), file);
    if (backed != 1) {
        char *fname = file_name_of(file);
        if (backed < 0)
            fb_fatal(FB_EXIT_DATA, "%s: dataset %s: its type or layout cannot be read (damaged file)", fname, path);
        fb_fatal(FB_EXIT_DATA,
                 "%s: dataset %s declares %zu elements of %zu bytes but the file stores %llu bytes of it "
                 "(damaged, or not written by fabula)",
                 fname, path, n, es, (unsigned long long)stored);
    }
    return n;
}

/* ------------------------------------------------------------ reads */

static void read_numeric(hid_t file, const char *path, hid_t memtype, void *out, size_t n)
{
    hid_t ds = open_dataset(file, path);
    size_t have = shape_of(ds, path, NULL, NULL);
    if (have != n) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_DATA, "%s: dataset %s has %zu elements, expected %zu", fname, path, have, n);
    }
    hid_t ft = H5Dget_type(ds);
    READ_H5(ft, file);
    H5T_class_t cls = H5Tget_class(ft);
    READ_H5(cls, file);
    READ_H5(H5Tclose(ft), file);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_DATA, "%s: dataset %s is not numeric", fname, path);
    }
    if (n > 0)
        READ_H5(H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), file);
    READ_H5(H5Dclose(ds), file);
}

void h5_read_f32(hid_t file, const char *path, float *out, size_t n)
{
    read_numeric(file, path, H5T_NATIVE_FLOAT, out, n);
}

void h5_read_f64(hid_t file, const char *path, double *out, size_t n)
{
    read_numeric(file, path, H5T_NATIVE_DOUBLE, out, n);
}

void h5_read_i32(hid_t file, const char *path, int *out, size_t n)
{
    read_numeric(file, path, H5T_NATIVE_INT, out, n);
}

void h5_read_i64(hid_t file, const char *path, long long *out, size_t n)
{
    read_numeric(file, path, H5T_NATIVE_LLONG, out, n);
}

double h5_read_scalar_f64(hid_t file, const char *path)
{
    double v;
    read_numeric(file, path, H5T_NATIVE_DOUBLE, &v, 1);
    return v;
}

/* ------------------------------------------------------------ attributes */

/* Opens attribute `name` of `obj`, checking it holds one value of `want`. */
static hid_t open_attr(hid_t obj, const char *name, H5T_class_t want, const char *want_text)
{
    htri_t e = H5Aexists(obj, name);
    READ_H5(e, obj);
    if (!e) {
        char *fname = file_name_of(obj), *opath = object_path_of(obj);
        fb_fatal(FB_EXIT_DATA, "%s: %s has no attribute '%s'", fname, opath, name);
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    READ_H5(a, obj);
    hid_t ft = H5Aget_type(a);
    READ_H5(ft, obj);
    H5T_class_t cls = H5Tget_class(ft);
    READ_H5(cls, obj);
    READ_H5(H5Tclose(ft), obj);
    hid_t sp = H5Aget_space(a);
    READ_H5(sp, obj);
    hssize_t npoints = H5Sget_simple_extent_npoints(sp);
    READ_H5(npoints, obj);
    READ_H5(H5Sclose(sp), obj);
    if (cls != want || npoints != 1) {
        char *fname = file_name_of(obj), *opath = object_path_of(obj);
        fb_fatal(FB_EXIT_DATA, "%s: attribute '%s' of %s is not a single %s", fname, name, opath, want_text);
    }
    return a;
}

char *h5_read_attr_string(hid_t obj, const char *name)
{
    hid_t a = open_attr(obj, name, H5T_STRING, "string");
    hid_t ft = H5Aget_type(a);
    READ_H5(ft, obj);
    htri_t variable = H5Tis_variable_str(ft);
    READ_H5(variable, obj);
    H5T_cset_t cset = H5Tget_cset(ft);
    READ_H5(cset, obj);
    /* The memory type keeps the stored character set: HDF5 refuses to
     * convert between ASCII and UTF-8 strings. */
    hid_t mt = H5Tcopy(H5T_C_S1);
    READ_H5(mt, obj);
    READ_H5(H5Tset_cset(mt, cset), obj);
    char *result;
    if (variable) {
        char *s = NULL;
        READ_H5(H5Tset_size(mt, H5T_VARIABLE), obj);
        READ_H5(H5Aread(a, mt, &s), obj);
        result = fb_strdup(s ? s : "");
        READ_H5(H5free_memory(s), obj);
    } else {
        size_t size = H5Tget_size(ft);
        FB_ASSERT(size > 0);
        /* the type's size comes from the file: no larger than what the
         * attribute stores (one string) */
        if (size > H5Aget_storage_size(a)) {
            char *fname = file_name_of(obj), *opath = object_path_of(obj);
            fb_fatal(FB_EXIT_DATA, "%s: attribute '%s' of %s declares a %zu-byte string but stores %llu bytes "
                     "(damaged file)", fname, name, opath, size, (unsigned long long)H5Aget_storage_size(a));
        }
        H5T_str_t pad = H5Tget_strpad(ft);
        READ_H5(pad, obj);
        READ_H5(H5Tset_size(mt, size), obj);
        READ_H5(H5Tset_strpad(mt, pad), obj);
        result = fb_calloc(size + 1, 1);
        READ_H5(H5Aread(a, mt, result), obj);
        if (pad == H5T_STR_SPACEPAD) {
            size_t n = strlen(result);
            while (n > 0 && result[n - 1] == ' ')
                result[--n] = '\0';
        }
    }
    READ_H5(H5Tclose(mt), obj);
    READ_H5(H5Tclose(ft), obj);
    READ_H5(H5Aclose(a), obj);
    return result;
}

long long h5_read_attr_i64(hid_t obj, const char *name)
{
    hid_t a = open_attr(obj, name, H5T_INTEGER, "integer");
    long long v;
    READ_H5(H5Aread(a, H5T_NATIVE_LLONG, &v), obj);
    READ_H5(H5Aclose(a), obj);
    return v;
}

/* ------------------------------------------------------------ writes */

static void write_dataset(hid_t file, const char *path, hid_t filetype, hid_t memtype, const void *data,
                          int ndim, const long long *dims)
{
    FB_ASSERT(ndim >= 0 && ndim <= H5_MAX_RANK);
    hsize_t hd[H5_MAX_RANK];
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        FB_ASSERT(dims[i] >= 0);
        hd[i] = (hsize_t)dims[i];
        numel *= (size_t)dims[i];
    }
    hid_t sp = ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndim, hd, NULL);
    CHECK_H5(sp);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    CHECK_H5(lcpl);
    CHECK_H5(H5Pset_create_intermediate_group(lcpl, 1));
    hid_t ds = H5Dcreate2(file, path, filetype, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (ds < 0) {
        char *fname = file_name_of(file);
        fb_fatal(FB_EXIT_IO, "%s: cannot create dataset %s (it may exist already; see the HDF5 error stack above)",
                 fname, path);
    }
    if (numel > 0)
        CHECK_H5(H5Dwrite(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
    CHECK_H5(H5Dclose(ds));
    CHECK_H5(H5Pclose(lcpl));
    CHECK_H5(H5Sclose(sp));
}

void h5_write_f32(hid_t file, const char *path, const float *data, int ndim, const long long *dims)
{
    write_dataset(file, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data, ndim, dims);
}

void h5_write_f64(hid_t file, const char *path, const double *data, int ndim, const long long *dims)
{
    write_dataset(file, path, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, data, ndim, dims);
}

void h5_write_i32(hid_t file, const char *path, const int *data, int ndim, const long long *dims)
{
    write_dataset(file, path, H5T_STD_I32LE, H5T_NATIVE_INT, data, ndim, dims);
}

void h5_write_i64(hid_t file, const char *path, const long long *data, int ndim, const long long *dims)
{
    write_dataset(file, path, H5T_STD_I64LE, H5T_NATIVE_LLONG, data, ndim, dims);
}

/* Creates attribute `name` (replacing an existing one), a scalar or (vector
 * set) a 1-D vector of n elements, and writes `buf`. */
static void write_attr(hid_t obj, const char *name, hid_t filetype, hid_t memtype, int vector, size_t n,
                       const void *buf)
{
    htri_t e = H5Aexists(obj, name);
    CHECK_H5(e);
    if (e)
        CHECK_H5(H5Adelete(obj, name));
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = vector ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_SCALAR);
    CHECK_H5(sp);
    hid_t a = H5Acreate2(obj, name, filetype, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_H5(a);
    CHECK_H5(H5Awrite(a, memtype, buf));
    CHECK_H5(H5Aclose(a));
    CHECK_H5(H5Sclose(sp));
}

void h5_write_attr_string(hid_t obj, const char *name, const char *value)
{
    /* HDF5 has no zero-size string type: "" is stored as one NUL byte. */
    size_t len = strlen(value);
    hid_t t = H5Tcopy(H5T_C_S1);
    CHECK_H5(t);
    CHECK_H5(H5Tset_size(t, len > 0 ? len : 1));
    CHECK_H5(H5Tset_strpad(t, H5T_STR_NULLPAD));
    CHECK_H5(H5Tset_cset(t, H5T_CSET_UTF8));
    write_attr(obj, name, t, t, 0, 1, len > 0 ? value : "");
    CHECK_H5(H5Tclose(t));
}

void h5_write_attr_i64(hid_t obj, const char *name, long long value)
{
    write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, 0, 1, &value);
}

void h5_write_attr_u64(hid_t obj, const char *name, uint64_t value)
{
    unsigned long long v = value;
    write_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_ULLONG, 0, 1, &v);
}

void h5_write_attr_f64(hid_t obj, const char *name, double value)
{
    write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, 1, &value);
}

void h5_write_attr_i64s(hid_t obj, const char *name, const long long *values, size_t n)
{
    write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, 1, n, values);
}
