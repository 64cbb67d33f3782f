/* `fabula ckpt info` and `fabula ckpt verify`: one process reading a
 * checkpoint with HDF5's default (serial) driver, no MPI involved. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt_impl.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "util/error.h"

/* Elements read at once by verify (whole rows of at most this many). */
#define VERIFY_SLAB ((size_t)1 << 24)

/* Opens `path`: FB_EXIT_IO when it cannot be read at all, -1 (with a
 * message) when HDF5 cannot make sense of it. */
static hid_t open_serial(const char *path)
{
    char why[1024];
    int code = regular_file_check(path, why, sizeof why);
    if (code == FB_EXIT_IO || (!code && access(path, R_OK) != 0))
        fb_fatal(FB_EXIT_IO, "%s: cannot open: %s", path, strerror(errno));
    if (code)
        fb_fatal(code, "%s", why);
    hid_t f = ckpt_open_read(path, 0, NULL);
    if (f < 0)
        printf("%s: DAMAGED: HDF5 cannot open it (truncated, or not an HDF5 file)\n", path);
    return f;
}

/* Opens `path` and reads its metadata into *m; -1 (having said why, and
 * left nothing open) when either fails. */
static int open_with_meta(const char *path, hid_t *f, ckpt_meta_t *m)
{
    *f = open_serial(path);
    if (*f < 0)
        return -1;
    char why[512];
    if (ckpt_meta_read(*f, m, why, sizeof why) < 0) {
        printf("%s: DAMAGED or not a checkpoint: %s\n", path, why);
        ckpt_meta_free(m);
        H5Fclose(*f);
        return -1;
    }
    return 0;
}

/* The tensor names of one group, read in a single pass in the order the
 * group's own index stores them (creation order: the model's, else name
 * order), never by position: looking a link up by index makes HDF5 build
 * and free a table of the whole group, which on a damaged link table
 * crashes inside HDF5. Each name is checked before use. */
typedef struct group_names {
    char **v;
    size_t n, max;
    int bad; /* a name that no writer produces */
} group_names_t;

static herr_t collect_name(hid_t group, const char *name, const H5L_info_t *info, void *op)
{
    (void)group;
    group_names_t *g = op;
    size_t len = strnlen(name, CKPT_NAME_MAX + 1);
    int ok = info->type == H5L_TYPE_HARD && len > 0 && len <= CKPT_NAME_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = name[i] > ' ' && name[i] < 0x7f && name[i] != '/';
    if (!ok || g->n == g->max) {
        g->bad = 1;
        return 1; /* stop: the rest of the table is not trusted either */
    }
    g->v[g->n++] = fb_strdup(name);
    return 0;
}

/* The names of `group`, at most `expect` + 1 of them. Returns -1 when the
 * group cannot be read or holds a name no writer writes (damaged). */
static int group_names_read(hid_t file, const char *group, long long expect, group_names_t *g)
{
    memset(g, 0, sizeof *g);
    g->max = expect >= 0 && expect < 1000000 ? (size_t)expect + 1 : 1;
    g->v = fb_calloc(g->max, sizeof *g->v);
    if (h5_lookup(file, group) <= 0)
        return -1;
    ckpt_h5_quiet_t q;
    ckpt_h5_quiet_begin(&q);
    herr_t rc = H5Literate_by_name(file, group, H5_INDEX_CRT_ORDER, H5_ITER_NATIVE, NULL, collect_name, g,
                                   H5P_DEFAULT);
    if (rc < 0 && !g->bad && g->n == 0)
        rc = H5Literate_by_name(file, group, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, collect_name, g, H5P_DEFAULT);
    ckpt_h5_quiet_end(&q);
    return rc < 0 || g->bad ? -1 : 0;
}

static void group_names_free(group_names_t *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i]);
    free(g->v);
}

static int dataset_shape(hid_t d, int *ndim, hsize_t dims[2])
{
    hid_t s = H5Dget_space(d);
    if (s < 0)
        return -1;
    int nd = H5Sget_simple_extent_ndims(s);
    int rc = nd >= 1 && nd <= 2 && H5Sget_simple_extent_dims(s, dims, NULL) >= 0 ? 0 : -1;
    H5Sclose(s);
    *ndim = nd;
    if (nd == 1)
        dims[1] = 1;
    /* no tensor is empty: a zero extent is a damaged dataspace; nor is one
     * larger than what the file stores of it (a damaged extent of 10^12
     * would be read as fill values, slab after slab, for hours) */
    if (rc < 0 || dims[0] == 0 || dims[1] == 0 || dims[0] > SIZE_MAX / dims[1])
        return -1;
    return h5_dataset_backs(d, (size_t)(dims[0] * dims[1])) == 1 ? 0 : -1;
}

static void print_meta(const char *path, const ckpt_meta_t *m, double file_bytes)
{
    printf("checkpoint   %s (%.1f MB)\n", path, file_bytes / 1e6);
    printf("format       %s version %lld, written by fabula %s, checksum %s\n", m->format, m->version,
           m->fabula_version, m->checksum_name);
    printf("progress     step %lld (optimizer updates %lld), %lld tokens seen\n", m->step, m->optimizer_step,
           m->tokens_seen);
    printf("layout       %lld rank(s): dp %lld, ep %lld, edp %lld, tp %lld, pp %lld; ZeRO stage %lld\n",
           m->world_size, m->dp_size, m->ep_size, m->edp_size, m->tp_size, m->pp_size, m->zero_stage);
    printf("scheduler    %s, next lr %.6g\n", m->sched_type, m->next_lr);
    printf("loss scaler  fp16 %s%s, bf16 %s, scale %g\n", m->fp16_enabled ? "on" : "off",
           m->fp16_enabled ? (m->fp16_dynamic ? " (dynamic)" : " (static)") : "", m->bf16_enabled ? "on" : "off",
           m->loss_scale);
    printf("rng          seed %lld, next step %lld (%s)\n", m->rng_seed, m->rng_next_step,
           m->rng_algorithm ? m->rng_algorithm : "?");
    printf("data         %lld samples, sampler epoch %lld position %lld, %lld deferred", (long long)m->data.nsamples,
           (long long)m->data.sampler_epoch, (long long)m->data.sampler_position, (long long)m->data.ndeferred);
    if (m->data.curriculum)
        printf(", curriculum epoch %lld positions %lld/%lld/%lld\n", (long long)m->data.curriculum_epoch,
               (long long)m->data.curriculum_pos[0], (long long)m->data.curriculum_pos[1],
               (long long)m->data.curriculum_pos[2]);
    else
        printf(", no curriculum\n");
    printf("tensors      %lld parameter tensors x 3 (params, optimizer m, optimizer v), %lld parameters\n",
           m->ntensors, m->parameters);
}

int ckpt_info(const char *path, int print_config)
{
    hid_t f;
    ckpt_meta_t m;
    if (open_with_meta(path, &f, &m) < 0)
        return FB_EXIT_DATA;
    if (strcmp(m.format, CKPT_FORMAT_NAME) != 0 || m.version > CKPT_FORMAT_VERSION) {
        printf("%s: format '%s' version %lld: this fabula reads '%s' up to version %d\n", path, m.format, m.version,
               CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION);
        ckpt_meta_free(&m);
        H5Fclose(f);
        return FB_EXIT_DATA;
    }
    struct stat sb;
    print_meta(path, &m, stat(path, &sb) == 0 ? (double)sb.st_size : 0.0);
    printf("\n%-64s %-14s %-18s %s\n", "dataset", "shape", "checksum", "file offset");
    int damaged = 0;
    for (int k = 0; k < CKPT_NKINDS; k++) {
        const char *group = ckpt_kind_group(k);
        group_names_t names;
        if (group_names_read(f, group, m.ntensors, &names) < 0) {
            printf("DAMAGED %s: its table of tensors cannot be read\n", group);
            damaged = 1;
        }
        for (size_t i = 0; i < names.n; i++) {
            char ds[512], shape[64] = "?";
            snprintf(ds, sizeof ds, "%s/%s", group, names.v[i]);
            ckpt_h5_quiet_t q;
            ckpt_h5_quiet_begin(&q);
            hid_t d = h5_lookup(f, ds) > 0 ? H5Dopen2(f, ds, H5P_DEFAULT) : -1;
            ckpt_h5_quiet_end(&q);
            if (d < 0) {
                printf("%-64s DAMAGED: cannot be opened\n", ds);
                damaged = 1;
                continue;
            }
            ckpt_h5_quiet_begin(&q);
            int nd;
            hsize_t dims[2];
            if (dataset_shape(d, &nd, dims) == 0) {
                if (nd == 1)
                    snprintf(shape, sizeof shape, "[%llu]", (unsigned long long)dims[0]);
                else
                    snprintf(shape, sizeof shape, "[%llu, %llu]", (unsigned long long)dims[0],
                             (unsigned long long)dims[1]);
            }
            uint64_t sum = 0;
            char sumtext[32] = "missing";
            if (ckpt_attr_read_u64(d, "checksum", &sum) == 0)
                snprintf(sumtext, sizeof sumtext, "0x%016llx", (unsigned long long)sum);
            haddr_t off = H5Dget_offset(d);
            H5Dclose(d);
            ckpt_h5_quiet_end(&q);
            printf("%-64s %-14s %-18s %llu\n", ds, shape, sumtext,
                   off == HADDR_UNDEF ? 0ULL : (unsigned long long)off);
        }
        group_names_free(&names);
    }
    if (print_config)
        printf("\nconfig:\n%s\n", m.config);
    ckpt_meta_free(&m);
    H5Fclose(f);
    return damaged ? FB_EXIT_DATA : FB_EXIT_OK;
}

/* Recomputes one dataset's checksum in slabs of whole rows. Returns -1 when
 * it cannot be read. */
static int checksum_dataset(hid_t d, uint64_t *sum)
{
    int nd;
    hsize_t dims[2];
    if (dataset_shape(d, &nd, dims) < 0)
        return -1;
    const size_t numel = (size_t)(dims[0] * dims[1]);
    const size_t row = (size_t)dims[1];
    size_t rows = VERIFY_SLAB / row > 0 ? VERIFY_SLAB / row : 1;
    hid_t fspace = H5Dget_space(d);
    if (fspace < 0)
        return -1;
    float *buf = fb_malloc((rows * row < numel ? rows * row : numel) * sizeof *buf);
    *sum = 0;
    int rc = 0;
    for (size_t a = 0; a < numel && rc == 0;) {
        size_t b = a + rows * row < numel ? a + rows * row : numel;
        hsize_t mdims[1] = {b - a};
        hid_t mspace = H5Screate_simple(1, mdims, NULL);
        CHECK_H5(mspace);
        ckpt_select_flat(fspace, nd, dims, a, b);
        if (H5Dread(d, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, buf) < 0)
            rc = -1;
        else
            *sum += ckpt_checksum(buf, b - a, a);
        H5Sclose(mspace);
        a = b;
    }
    H5Sclose(fspace);
    free(buf);
    return rc;
}

int ckpt_verify(const char *path, int quiet)
{
    hid_t f;
    ckpt_meta_t m;
    if (open_with_meta(path, &f, &m) < 0)
        return FB_EXIT_DATA;
    if (strcmp(m.format, CKPT_FORMAT_NAME) != 0 || m.version > CKPT_FORMAT_VERSION ||
        strcmp(m.checksum_name, CKPT_CHECKSUM_NAME) != 0) {
        printf("%s: format '%s' version %lld, checksum '%s': this fabula verifies '%s' up to version %d with '%s'\n",
               path, m.format, m.version, m.checksum_name, CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION, CKPT_CHECKSUM_NAME);
        ckpt_meta_free(&m);
        H5Fclose(f);
        return FB_EXIT_DATA;
    }
    const long long step = m.step;
    long long checked = 0, damaged = 0;
    for (int k = 0; k < CKPT_NKINDS; k++) {
        const char *group = ckpt_kind_group(k);
        group_names_t names;
        if (group_names_read(f, group, m.ntensors, &names) < 0) {
            printf("DAMAGED %s: its table of tensors cannot be read\n", group);
            damaged++;
        } else if ((long long)names.n != m.ntensors) {
            printf("DAMAGED %s: %zu tensors, the file says %lld\n", group, names.n, m.ntensors);
            damaged++;
        }
        for (size_t i = 0; i < names.n; i++) {
            char ds[512];
            snprintf(ds, sizeof ds, "%s/%s", group, names.v[i]);
            ckpt_h5_quiet_t q;
            ckpt_h5_quiet_begin(&q);
            hid_t d = h5_lookup(f, ds) > 0 ? H5Dopen2(f, ds, H5P_DEFAULT) : -1;
            uint64_t stored = 0, sum = 0;
            int no_sum = d < 0 || ckpt_attr_read_u64(d, "checksum", &stored) < 0;
            int unreadable = d < 0 || checksum_dataset(d, &sum) < 0;
            if (d >= 0)
                H5Dclose(d);
            ckpt_h5_quiet_end(&q);
            checked++;
            if (unreadable || no_sum || sum != stored) {
                damaged++;
                if (unreadable)
                    printf("DAMAGED %s: cannot be read\n", ds);
                else if (no_sum)
                    printf("DAMAGED %s: no checksum attribute\n", ds);
                else
                    printf("DAMAGED %s: checksum 0x%016llx, stored 0x%016llx\n", ds, (unsigned long long)sum,
                           (unsigned long long)stored);
            } else if (!quiet) {
                printf("ok      %s 0x%016llx\n", ds, (unsigned long long)sum);
            }
        }
        group_names_free(&names);
    }
    ckpt_meta_free(&m);
    H5Fclose(f);
    if (damaged) {
        printf("%s: DAMAGED: %lld of %lld tensors fail the check\n", path, damaged, checked);
        return FB_EXIT_DATA;
    }
    printf("%s: ok: %lld tensors, every checksum matches (step %lld)\n", path, checked, step);
    return FB_EXIT_OK;
}

int ckpt_read_config(const char *path, char **config_json, long *step, char *why, size_t why_len)
{
    *config_json = NULL;
    char msg[1024];
    int code = regular_file_check(path, msg, sizeof msg);
    if (code == FB_EXIT_DATA) { /* its reason, without the path the caller names */
        snprintf(why, why_len, "%s", msg + strlen(path) + 2);
        return code;
    }
    if (code || access(path, R_OK) != 0) {
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return FB_EXIT_IO;
    }
    hid_t f = ckpt_open_read(path, 0, NULL);
    if (f < 0) {
        snprintf(why, why_len, "HDF5 cannot open it (truncated, or not an HDF5 file)");
        return FB_EXIT_DATA;
    }
    ckpt_meta_t m;
    if (ckpt_meta_read(f, &m, why, why_len) < 0) {
        ckpt_meta_free(&m);
        H5Fclose(f);
        return FB_EXIT_DATA;
    }
    code = FB_EXIT_OK;
    if (strcmp(m.format, CKPT_FORMAT_NAME) != 0 || m.version > CKPT_FORMAT_VERSION) {
        snprintf(why, why_len, "format '%s' version %lld: this fabula reads '%s' up to version %d", m.format,
                 m.version, CKPT_FORMAT_NAME, CKPT_FORMAT_VERSION);
        code = FB_EXIT_DATA;
    } else {
        *config_json = m.config;
        m.config = NULL; /* handed to the caller */
        *step = (long)m.step;
    }
    ckpt_meta_free(&m);
    CHECK_H5(H5Fclose(f));
    return code;
}
