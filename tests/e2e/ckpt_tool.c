/* Helper of the checkpoint shell tests (never installed):
 *   ckpt_tool set-i64 FILE ATTR VALUE    rewrite an integer attribute of "/"
 *   ckpt_tool get-str FILE ATTR          print a string attribute of "/"
 *   ckpt_tool set-str FILE ATTR VALUE    replace it (fixed-size UTF-8)
 *   ckpt_tool extent FILE DSET N0 [N1]   replace a dataset by one of that
 *       shape, chunked and never written (it reads as fill values), its
 *       attributes (the checksum) copied
 *   ckpt_tool compare A B TOL            every /params, /optimizer/m and
 *       /optimizer/v tensor of A and B: max |a - b| <= TOL * max |a| per
 *       tensor; prints the worst; exit 1 when over, 2 on a missing tensor. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_i64(const char *path, const char *attr, long long value)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return 2;
    hid_t a = H5Aopen(f, attr, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, H5T_NATIVE_LLONG, &value) < 0)
        return 2;
    H5Aclose(a);
    return H5Fclose(f) < 0 ? 2 : 0;
}

static int get_str(const char *path, const char *attr)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = f >= 0 ? H5Aopen(f, attr, H5P_DEFAULT) : -1;
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    if (t < 0 || H5Tis_variable_str(t))
        return 2;
    size_t n = H5Tget_size(t);
    char *buf = calloc(n + 1, 1);
    if (!buf || H5Aread(a, t, buf) < 0)
        return 2;
    fputs(buf, stdout);
    free(buf);
    H5Tclose(t);
    H5Aclose(a);
    return H5Fclose(f) < 0 ? 2 : 0;
}

static int set_str(const char *path, const char *attr, const char *value)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0 || H5Adelete(f, attr) < 0)
        return 2;
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(value) + 1);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(f, attr, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, t, value) < 0)
        return 2;
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return H5Fclose(f) < 0 ? 2 : 0;
}

static herr_t copy_attr(hid_t from, const char *name, const H5A_info_t *info, void *to)
{
    (void)info;
    hid_t a = H5Aopen(from, name, H5P_DEFAULT), t = H5Aget_type(a), sp = H5Aget_space(a);
    size_t n = H5Tget_size(t) * (size_t)H5Sget_simple_extent_npoints(sp);
    void *buf = malloc(n + 1);
    hid_t b = H5Acreate2(*(hid_t *)to, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = buf && b >= 0 && H5Aread(a, t, buf) >= 0 && H5Awrite(b, t, buf) >= 0 ? 0 : -1;
    free(buf);
    H5Aclose(b);
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int extent(const char *path, const char *ds, int nd, const hsize_t *dims)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, ds, H5P_DEFAULT) : -1;
    if (d < 0 || H5Lmove(f, ds, f, "/extent_old", H5P_DEFAULT, H5P_DEFAULT) < 0)
        return 2;
    hsize_t maxdims[2] = {H5S_UNLIMITED, H5S_UNLIMITED}, chunk[2] = {64, 64};
    hid_t sp = H5Screate_simple(nd, dims, maxdims), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, nd, chunk);
    hid_t t = H5Dget_type(d);
    hid_t e = H5Dcreate2(f, ds, t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (e < 0 || H5Aiterate2(d, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attr, &e) < 0)
        return 2;
    H5Dclose(e);
    H5Dclose(d);
    H5Tclose(t);
    H5Pclose(dcpl);
    H5Sclose(sp);
    if (H5Ldelete(f, "/extent_old", H5P_DEFAULT) < 0)
        return 2;
    return H5Fclose(f) < 0 ? 2 : 0;
}

static float *read_all(hid_t f, const char *ds, size_t *n)
{
    hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
    if (d < 0)
        return NULL;
    hid_t s = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(s);
    float *x = malloc(*n * sizeof *x + 1);
    if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) {
        free(x);
        x = NULL;
    }
    H5Sclose(s);
    H5Dclose(d);
    return x;
}

static int compare(const char *pa, const char *pb, double tol)
{
    static const char *const groups[] = {"/params", "/optimizer/m", "/optimizer/v"};
    hid_t fa = H5Fopen(pa, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(pb, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || fb < 0)
        return 2;
    double worst = 0.0;
    char worst_name[512] = "";
    int tensors = 0;
    for (int g = 0; g < 3; g++) {
        H5G_info_t info;
        if (H5Gget_info_by_name(fa, groups[g], &info, H5P_DEFAULT) < 0)
            return 2;
        for (hsize_t i = 0; i < info.nlinks; i++) {
            char name[256], ds[512];
            H5Lget_name_by_idx(fa, groups[g], H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
            snprintf(ds, sizeof ds, "%s/%s", groups[g], name);
            size_t na, nb;
            float *a = read_all(fa, ds, &na), *b = read_all(fb, ds, &nb);
            if (!a || !b || na != nb) {
                printf("%s: missing or of another size in %s\n", ds, pb);
                return 2;
            }
            double maxa = 0.0, maxd = 0.0;
            for (size_t k = 0; k < na; k++) {
                maxa = fmax(maxa, fabs(a[k]));
                maxd = fmax(maxd, fabs((double)a[k] - (double)b[k]));
            }
            double rel = maxa > 0.0 ? maxd / maxa : maxd;
            if (rel >= worst) {
                worst = rel;
                snprintf(worst_name, sizeof worst_name, "%s", ds);
            }
            tensors++;
            free(a);
            free(b);
        }
    }
    printf("compare: %d tensors, largest max|a-b|/max|a| = %.3g (%s), tolerance %.3g\n", tensors, worst, worst_name,
           tol);
    H5Fclose(fa);
    H5Fclose(fb);
    return worst <= tol ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "set-i64"))
        return set_i64(argv[2], argv[3], atoll(argv[4]));
    if (argc == 5 && !strcmp(argv[1], "compare"))
        return compare(argv[2], argv[3], atof(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "get-str"))
        return get_str(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "set-str"))
        return set_str(argv[2], argv[3], argv[4]);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "extent")) {
        hsize_t dims[2] = {(hsize_t)atoll(argv[4]), argc == 6 ? (hsize_t)atoll(argv[5]) : 0};
        return extent(argv[2], argv[3], argc - 4, dims);
    }
    fprintf(stderr, "usage: ckpt_tool set-i64 FILE ATTR VALUE | get-str FILE ATTR | set-str FILE ATTR VALUE | "
                    "extent FILE DSET N0 [N1] | compare A B TOL\n");
    return 2;
}
