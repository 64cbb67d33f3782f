/* Checkpoint building blocks: the layout-independent checksum against a
 * direct evaluation of its documented formula, the flat-range selection
 * against element-by-element expectations, and checkpoint file names. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "train/ckpt_policy.h"

static int fails, checks;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        fails++;
        printf("FAIL: %s\n", what);
    }
}

/* The formula of docs/checkpoint.md, written out again element by element,
 * with the 64-bit products done as 32-bit halves so that an error in the
 * library's modular arithmetic would not be repeated here. */
static uint64_t mul64(uint64_t a, uint64_t b)
{
    uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
    return al * bl + (((al * bh) + (ah * bl)) << 32);
}

static uint64_t reference_checksum(const float *x, size_t n, uint64_t pos0)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        uint64_t y = mul64(mul64(pos0 + i, 0x9e3779b97f4a7c15ULL) ^ bits, 0xbf58476d1ce4e5b9ULL);
        sum += y ^ (y >> 31);
    }
    return sum;
}

static void test_checksum(void)
{
    /* past the OpenMP threshold, so the parallel reduction is exercised */
    const size_t n = 200003;
    float *x = malloc(n * sizeof *x);
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    uint64_t whole = ckpt_checksum(x, n, 0);
    check(whole == reference_checksum(x, n, 0), "checksum equals the documented formula");
    /* any partition into pieces adds up to the whole (mod 2^64) */
    const size_t cuts[][3] = {{1, 2, 3}, {70000, 70001, 150000}, {0, 0, 200003}, {100, 199999, 200002}};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        size_t a = cuts[c][0], b = cuts[c][1], d = cuts[c][2];
        uint64_t parts = ckpt_checksum(x, a, 0) + ckpt_checksum(x + a, b - a, a) + ckpt_checksum(x + b, d - b, b) +
                         ckpt_checksum(x + d, n - d, d);
        check(parts == whole, "pieces sum to the whole tensor's checksum");
    }
    /* a moved element or one flipped bit changes it */
    float t = x[10];
    x[10] = x[11];
    x[11] = t;
    check(ckpt_checksum(x, n, 0) != whole, "swapping two elements changes the checksum");
    x[11] = x[10];
    x[10] = t;
    check(ckpt_checksum(x, n, 0) == whole, "swapped back: same checksum");
    uint32_t bits;
    memcpy(&bits, &x[5000], sizeof bits);
    bits ^= 1u << 7;
    memcpy(&x[5000], &bits, sizeof bits);
    check(ckpt_checksum(x, n, 0) != whole, "one flipped bit changes the checksum");
    free(x);
}

/* Every implementation the CPU runs (plain C, AVX2, AVX-512) against the
 * formula: lengths around the vector widths and the block size, starts off
 * the vector alignment, positions near 2^64 where the running products
 * wrap. Prints which paths ran, so a log shows what this machine tested. */
static void test_checksum_paths(void)
{
    const size_t n = 300007;
    float *x = malloc(n * sizeof *x);
    uint64_t s = 99;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t bits = (uint32_t)(s >> 32);
        memcpy(&x[i], &bits, sizeof bits);
    }
    const uint64_t pos[] = {0, 1, 7, 123456789, 0xfffffffffffffff0ULL, 0x8000000000000003ULL};
    const char *names[CKPT_SUM_NISA] = {"plain", "avx2", "avx512"};
    for (int isa = 0; isa < CKPT_SUM_NISA; isa++) {
        if (!ckpt_checksum_isa_supported(isa)) {
            printf("test_ckpt: checksum path %s: not on this CPU or build, skipped\n", names[isa]);
            continue;
        }
        int bad = 0;
        for (size_t p = 0; p < sizeof pos / sizeof *pos; p++)
            for (size_t off = 0; off < 9; off++)
                for (size_t len = 0; len <= 41; len++)
                    bad += ckpt_checksum_isa(isa, x + off, len, pos[p]) != reference_checksum(x + off, len, pos[p]);
        check(bad == 0, "each checksum path equals the formula on short runs");
        for (size_t p = 0; p < sizeof pos / sizeof *pos; p++)
            check(ckpt_checksum_isa(isa, x + 3, n - 3, pos[p]) == reference_checksum(x + 3, n - 3, pos[p]),
                  "each checksum path equals the formula on a long run");
        printf("test_ckpt: checksum path %s checked\n", names[isa]);
    }
    /* the threaded sum over blocks (and its serial form) at odd cuts */
    const size_t cuts[] = {(1u << 18) - 1, 1u << 18, (1u << 18) + 1, n - 1, n};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        check(ckpt_checksum(x, cuts[c], 5) == reference_checksum(x, cuts[c], 5), "threaded checksum at a block edge");
        check(ckpt_checksum_serial(x + 1, cuts[c] - 1, 6) == reference_checksum(x + 1, cuts[c] - 1, 6),
              "serial checksum");
    }
    free(x);
}

/* Writes 1..(b-a) through ckpt_select_flat into a zeroed dataset of shape
 * dims and checks every element of the flattened result. */
static int selection_ok(hid_t file, int ndim, const hsize_t *dims, size_t a, size_t b)
{
    static int count;
    char name[32];
    snprintf(name, sizeof name, "d%d", count++);
    hid_t fspace = H5Screate_simple(ndim, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    float zero = 0.0f;
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &zero);
    hid_t d = H5Dcreate2(file, name, H5T_IEEE_F32LE, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t total = (size_t)dims[0] * (ndim == 2 ? (size_t)dims[1] : 1);
    float *v = malloc((b - a) * sizeof *v), *all = malloc(total * sizeof *all);
    for (size_t i = 0; i < b - a; i++)
        v[i] = (float)(i + 1);
    hsize_t m[1] = {b - a};
    hid_t mspace = H5Screate_simple(1, m, NULL);
    ckpt_select_flat(fspace, ndim, dims, a, b);
    int ok = H5Sget_select_npoints(fspace) == (hssize_t)(b - a) &&
             H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, v) >= 0 &&
             H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0;
    for (size_t i = 0; ok && i < total; i++) {
        float want = i >= a && i < b ? (float)(i - a + 1) : 0.0f;
        ok = all[i] == want;
    }
    free(v);
    free(all);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Pclose(dcpl);
    H5Dclose(d);
    return ok;
}

static void test_select(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0); /* in memory */
    hid_t file = H5Fcreate("test_ckpt_select.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    const hsize_t d2[2] = {7, 5}, d1[1] = {13}, row[2] = {1, 9}, col[2] = {6, 1};
    int all2 = 1, all1 = 1, edge = 1;
    for (size_t a = 0; a < 35; a++)
        for (size_t b = a + 1; b <= 35; b++)
            all2 &= selection_ok(file, 2, d2, a, b);
    for (size_t a = 0; a < 13; a++)
        for (size_t b = a + 1; b <= 13; b++)
            all1 &= selection_ok(file, 1, d1, a, b);
    for (size_t a = 0; a < 9; a++)
        for (size_t b = a + 1; b <= 9; b++)
            edge &= selection_ok(file, 2, row, a, b) && (b > 6 || selection_ok(file, 2, col, a, b));
    check(all2, "2-D [7, 5]: every flat range [a, b) selects exactly those elements, in order");
    check(all1, "1-D [13]: every flat range selects exactly those elements");
    check(edge, "2-D single row [1, 9] and single column [6, 1]");
    H5Fclose(file);
}

/* A tensor-parallel slice of a [6, 8] tensor: rows (dim 0) or columns
 * (dim 1) [off, off + 8 / parts or 6 / parts), as param_table_build_tp cuts. */
static param_view_t slice_view(int dim, int parts, int part)
{
    param_view_t v;
    memset(&v, 0, sizeof v);
    v.ndim = 2;
    v.full_shape[0] = 6;
    v.full_shape[1] = 8;
    v.shape[0] = dim == 0 ? 6 / parts : 6;
    v.shape[1] = dim == 1 ? 8 / parts : 8;
    v.tp_dim = dim;
    v.tp_off = (int64_t)part * v.shape[dim];
    v.numel = (size_t)(v.shape[0] * v.shape[1]);
    return v;
}

/* Writes local elements [a, b) of slice v (values: their full flat position
 * + 1, from the test's own row/column arithmetic) through ckpt_select_view
 * into a zeroed [6, 8] dataset; every element must be its value or 0. */
static int slice_selection_ok(hid_t file, const param_view_t *v, size_t a, size_t b)
{
    static int count;
    char name[32];
    snprintf(name, sizeof name, "s%d", count++);
    const hsize_t dims[2] = {6, 8};
    hid_t fspace = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    float zero = 0.0f, all[48], want[48] = {0}, x[48];
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &zero);
    hid_t d = H5Dcreate2(file, name, H5T_IEEE_F32LE, fspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    for (size_t e = a; e < b; e++) {
        size_t r = e / (size_t)v->shape[1], c = e % (size_t)v->shape[1];
        size_t full = v->tp_dim == 0 ? (r + (size_t)v->tp_off) * 8 + c : r * 8 + c + (size_t)v->tp_off;
        x[e - a] = (float)(full + 1);
        want[full] = (float)(full + 1);
    }
    hsize_t m[1] = {b - a};
    hid_t mspace = H5Screate_simple(1, m, NULL);
    ckpt_select_view(fspace, 2, dims, v, a, b);
    int ok = H5Sget_select_npoints(fspace) == (hssize_t)(b - a) &&
             H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, x) >= 0 &&
             H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0;
    for (size_t i = 0; ok && i < 48; i++)
        ok = all[i] == want[i];
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Pclose(dcpl);
    H5Dclose(d);
    return ok;
}

static void test_slices(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    hid_t file = H5Fcreate("test_ckpt_slices.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    float whole[48];
    for (int i = 0; i < 48; i++)
        whole[i] = 0.25f * (float)i - 3.0f;
    const uint64_t want = ckpt_checksum(whole, 48, 0);
    int sel = 1, sums = 1;
    const int cases[3][2] = {{0, 2}, {1, 2}, {1, 4}};
    for (int k = 0; k < 3; k++) {
        const int dim = cases[k][0], parts = cases[k][1];
        uint64_t total = 0, total_serial = 0;
        for (int part = 0; part < parts; part++) {
            param_view_t v = slice_view(dim, parts, part);
            for (size_t a = 0; a < v.numel; a++)
                for (size_t b = a + 1; b <= v.numel; b++)
                    sel &= slice_selection_ok(file, &v, a, b);
            /* the slice's local elements, cut in three pieces as ZeRO shards cut it */
            float loc[48];
            for (size_t e = 0; e < v.numel; e++) {
                size_t r = e / (size_t)v.shape[1], c = e % (size_t)v.shape[1];
                loc[e] = whole[dim == 0 ? (r + (size_t)v.tp_off) * 8 + c : r * 8 + c + (size_t)v.tp_off];
            }
            const size_t c1 = v.numel / 3, c2 = v.numel - 1;
            total += ckpt_view_checksum(&v, loc, 0, c1) + ckpt_view_checksum(&v, loc + c1, c1, c2) +
                     ckpt_view_checksum(&v, loc + c2, c2, v.numel);
            total_serial += ckpt_view_checksum_serial(&v, loc, 0, v.numel);
        }
        sums &= total == want && total_serial == want;
    }
    check(sel, "tp slices of [6, 8] (rows / 2, columns / 2 and / 4): every local range [a, b) selects exactly "
               "its elements' full positions, in order");
    check(sums, "the slices' checksums, pieces and all, add up to the whole tensor's");
    H5Fclose(file);
}

static void test_names(void)
{
    check(ckpt_policy_parse_name("step-00001000.h5") == 1000, "step-00001000.h5 -> 1000");
    check(ckpt_policy_parse_name("step-7.h5") == 7, "step-7.h5 -> 7");
    check(ckpt_policy_parse_name("step-.h5") == -1, "step-.h5 refused");
    check(ckpt_policy_parse_name("step-12.h5.tmp") == -1, "a temporary name is not a checkpoint");
    check(ckpt_policy_parse_name(".step-12.h5.tmp") == -1, "a hidden temporary is not a checkpoint");
    check(ckpt_policy_parse_name("step-12x.h5") == -1, "step-12x.h5 refused");
    check(ckpt_policy_parse_name("latest") == -1, "latest is not a checkpoint");
    check(ckpt_policy_parse_name("step-99999999999999999999999.h5") == -1, "an overflowing step refused");
}

int main(void)
{
    test_checksum();
    test_checksum_paths();
    test_select();
    test_slices();
    test_names();
    printf("test_ckpt: %d checks, %d failed (checksum formula and layout independence, flat-range selections "
           "on 1-D and 2-D tensors, tensor-parallel slices, checkpoint names)\n", checks, fails);
    return fails ? 1 : 0;
}
