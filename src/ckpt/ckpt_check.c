/* ckpt_check_model (ckpt/ckpt.h): a checkpoint's tensors against the model
 * a command is about to allocate from the config the checkpoint carries.
 * That config is data from the file: a vocab_size of 10^9 there would
 * otherwise be allocated before any tensor is looked at. */
#include <stdio.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "model/params.h"
#include "util/error.h"

/* "[a, b]" of a shape of rank nd (at most 2, as every parameter) */
static void shape_text(char *buf, size_t n, int nd, const unsigned long long *d)
{
    if (nd == 1)
        snprintf(buf, n, "[%llu]", d[0]);
    else if (nd == 2)
        snprintf(buf, n, "[%llu, %llu]", d[0], d[1]);
    else
        snprintf(buf, n, "of rank %d", nd);
}

/* One parameter: present, of the view's shape, its bytes stored. */
static int check_view(hid_t file, const param_view_t *v, char *why, size_t cap)
{
    char ds[256];
    ckpt_dataset_path(ds, sizeof ds, CKPT_PARAMS, v->name);
    if (h5_lookup(file, ds) <= 0) {
        snprintf(why, cap, "tensor %s is missing or cannot be looked up: the checkpoint holds another model, or is "
                           "damaged", ds);
        return FB_EXIT_DATA;
    }
    hid_t d = H5Dopen2(file, ds, H5P_DEFAULT);
    hid_t s = d >= 0 ? H5Dget_space(d) : -1;
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    hsize_t dims[2] = {0, 0};
    if (nd >= 1 && nd <= 2 && H5Sget_simple_extent_dims(s, dims, NULL) < 0)
        nd = -1;
    if (s >= 0)
        H5Sclose(s);
    int code = 0;
    unsigned long long have[2] = {dims[0], nd == 2 ? dims[1] : 0}, want[2] = {(unsigned long long)v->shape[0],
                                                                             (unsigned long long)v->shape[1]};
    if (nd < 0) {
        snprintf(why, cap, "tensor %s cannot be read (damaged metadata)", ds);
        code = FB_EXIT_DATA;
    } else if (nd != v->ndim || have[0] != want[0] || (nd == 2 && have[1] != want[1])) {
        char hs[64], ws[64];
        shape_text(hs, sizeof hs, nd, have);
        shape_text(ws, sizeof ws, v->ndim, want);
        snprintf(why, cap, "tensor %s has shape %s, its config's model %s: the checkpoint is damaged", ds, hs, ws);
        code = FB_EXIT_DATA;
    } else if (h5_dataset_backs(d, v->numel) != 1) {
        snprintf(why, cap, "tensor %s: the file does not store its %zu elements (damaged)", ds, v->numel);
        code = FB_EXIT_DATA;
    }
    if (d >= 0)
        H5Dclose(d);
    return code;
}

int ckpt_check_model(const char *path, const model_config_t *mc, char *why, size_t why_len)
{
    hid_t f = ckpt_open_read(path, 0, NULL);
    if (f < 0) {
        snprintf(why, why_len, "HDF5 cannot open it (truncated, or not an HDF5 file)");
        return FB_EXIT_DATA;
    }
    param_table_t t;
    param_table_build(&t, mc);
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    int code = 0;
    for (int i = 0; i < t.n && !code; i++)
        code = check_view(f, &t.views[i], why, why_len);
    ckpt_h5_quiet_end(&q);
    param_table_free(&t);
    H5Fclose(f);
    return code;
}
