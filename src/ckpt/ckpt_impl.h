/* Private to the checkpoint code (ckpt_h5.c: file access, selections,
 * attributes; ckpt_checksum.c: the checksum; ckpt_meta.c: the metadata; ckpt_write.c,
 * ckpt_read.c, ckpt_inspect.c: the three ways of going through a file). */
#ifndef FABULA_IO_CKPT_IMPL_H
#define FABULA_IO_CKPT_IMPL_H

#include <hdf5.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "model/params.h"
#include "parallel/mpi_io.h"

/* The three tensors stored per parameter. */
enum { CKPT_PARAMS = 0, CKPT_M = 1, CKPT_V = 2, CKPT_NKINDS = 3 };

/* Group of each kind ("/params", "/optimizer/m", "/optimizer/v"). */
const char *ckpt_kind_group(int kind);
/* The longest tensor name a checkpoint holds. */
#define CKPT_NAME_MAX 95
/* "/params/<name>" etc. into buf (names are at most CKPT_NAME_MAX characters). */
void ckpt_dataset_path(char *buf, size_t n, int kind, const char *name);

/* Datasets of at least CKPT_ALIGN_THRESHOLD bytes start on a multiple of
 * CKPT_ALIGNMENT in the file (file-system stripes and blocks). */
#define CKPT_ALIGN_THRESHOLD (4u << 20)
#define CKPT_ALIGNMENT (1u << 20)
/* Elements one rank moves in one H5Dwrite/H5Dread: well under the 2 GiB
 * that MPI-IO counts address. */
#define CKPT_ROUND_ELEMENTS ((size_t)1 << 28)

/* A file access property list: MPI-IO on the world with collective
 * metadata reads and writes and the alignment above (parallel), or the
 * default driver (serial); both with the 1.8+ object format. */
hid_t ckpt_fapl(int parallel, const mpi_hints_t *hints);

/* The layout-independent checksum of elements [pos0, pos0 + n) of a tensor
 * (positions in its flattened, row-major order) holding x[0..n), all
 * arithmetic modulo 2^64:
 *   y_i = ((pos0 + i) * 0x9e3779b97f4a7c15 XOR bits(x[i])) * 0xbf58476d1ce4e5b9
 *   sum over i of (y_i XOR (y_i >> 31))
 * with bits() the IEEE-754 binary32 bit pattern. A sum of per-position
 * terms, so ranks checksum their pieces and add the results, whatever the
 * pieces. Spread over the OpenMP threads. */
uint64_t ckpt_checksum(const float *x, size_t n, uint64_t pos0);
/* The same on the calling thread alone (inside a parallel region). */
uint64_t ckpt_checksum_serial(const float *x, size_t n, uint64_t pos0);
/* The implementations, for the tests: each returns the same sum; a path is
 * usable when the build and the CPU have it. */
enum { CKPT_SUM_PLAIN, CKPT_SUM_AVX2, CKPT_SUM_AVX512, CKPT_SUM_NISA };
int ckpt_checksum_isa_supported(int isa);
uint64_t ckpt_checksum_isa(int isa, const float *x, size_t n, uint64_t pos0);
#define CKPT_CHECKSUM_NAME "sum64-mulxs-v1"

/* Selects the flattened elements [a, b) (a < b) of a dataspace of rank 1 or
 * 2: up to three blocks (a partial first row, whole rows, a partial last
 * row), which HDF5 visits in row-major order. */
void ckpt_select_flat(hid_t space, int ndim, const hsize_t *dims, size_t a, size_t b);

/* Selects a tensor's elements that the local view lv holds as its local
 * flat elements [a, b) (a < b): under tensor parallelism a row slice is a
 * flat range at an offset, a column slice up to three 2-D blocks of its
 * columns; lv NULL: the flat range [a, b) itself. HDF5 visits the
 * selection in the order of the local elements. */
void ckpt_select_view(hid_t space, int ndim, const hsize_t *dims, const param_view_t *lv, size_t a, size_t b);
/* The whole tensor's checksum terms of local elements [a, b) of lv held in
 * x[0, b - a), each at its position in the full tensor (lv NULL: position
 * e for element e): a rank's slice, whatever it is, adds its share of the
 * same layout-independent sum. Over the threads, or (serial) on the
 * calling one. */
uint64_t ckpt_view_checksum(const param_view_t *lv, const float *x, size_t a, size_t b);
uint64_t ckpt_view_checksum_serial(const param_view_t *lv, const float *x, size_t a, size_t b);

/* The view of global tensor `gv` (index i of the global table) in this
 * rank's table, or NULL (expert parallelism: experts held elsewhere;
 * pipeline parallelism: another stage's layers). Local views carry their
 * global names; under tensor parallelism they are slices of gv. */
const param_view_t *ckpt_local_view(const param_table_t *local, int i, const param_view_t *gv);
/* Where kind's elements of a shard start (element sh->lo), and whether that
 * memory is host memory (else copies go through the backend). */
float *ckpt_shard_base(const zero_shard_t *sh, int kind);
int ckpt_shard_on_host(const ckpt_target_t *t, const zero_shard_t *sh, int kind);
/* Sums n 64-bit checksums over all ranks, modulo 2^64 (collective). */
void ckpt_allreduce_checksums(uint64_t *sums, size_t n);

/* The data transfers of a save or load. A tensor whose elements several
 * ranks hold (a ZeRO shard boundary inside it, or replicated at stage 0
 * when loading) moves in a collective transfer every rank joins; a tensor
 * inside one rank's range moves in an independent transfer of that rank
 * alone, unless checkpoint.collective is "all". */
typedef struct ckpt_xfer {
    hid_t coll, indep;              /* dataset transfer property lists */
    int all_collective;
    long long collective, independent, not_collective;
    unsigned cause_local, cause_global; /* H5Pget_mpio_no_collective_cause of the last one */
} ckpt_xfer_t;
void ckpt_xfer_init(ckpt_xfer_t *x, int all_collective);
void ckpt_xfer_free(ckpt_xfer_t *x);
/* This rank's part of one tensor (the same for its params and moments), in
 * elements of the tensor: [a, b), the part it moves, and [wa, wb) inside
 * it, the part inside its write range (the part it checksums). */
typedef struct ckpt_piece {
    const param_view_t *lv; /* NULL: not held here */
    size_t a, b, wa, wb;
} ckpt_piece_t;
/* Which part of its shard a rank moves: all of its ZeRO range [lo, hi)
 * (a load: every holder sets its own copy), or only its write range (a
 * save: each element is written once). */
enum { CKPT_MOVE_ZERO_RANGE = 0, CKPT_MOVE_WRITE_RANGE = 1 };
/* Collective: this rank's piece of every tensor of `global` (its views in
 * `local`, in local elements of the view), and in *sharers (caller frees)
 * how many ranks move a non-empty piece of each. Of the copies of a tensor
 * that several tp ranks or stages hold whole, only the lowest (tp, pp)
 * coordinate's has a write range (and, saving, a piece). Caller frees the
 * pieces. */
ckpt_piece_t *ckpt_pieces_build(const zero_shard_t *shard, const param_table_t *global, const param_table_t *local,
                                const groups_t *groups, int move, long long **sharers);
/* Moves this rank's local elements [a, b) of view lv (ckpt_select_view) of
 * a dataset of shape dims (ndim 1 or 2, numel elements) from buf (write) or
 * into buf (read), in pieces under
 * the MPI-IO limit. `sharers`: how many ranks move a piece of it. Every
 * rank calls this for a collective transfer, only ranks with b > a for an
 * independent one (others return at once). Returns -1 when HDF5 fails. */
int ckpt_xfer_run(ckpt_xfer_t *x, hid_t dset, int ndim, const hsize_t *dims, size_t numel, const param_view_t *lv,
                  size_t a, size_t b, float *buf, int write, long long sharers);

/* Attribute readers for a file that may be damaged or foreign (h5tensor
 * writes them): unsigned 64-bit, int64, double, int64 vectors. They return
 * 0, or -1 when the attribute is absent or of another shape, silently. */
int ckpt_attr_read_u64(hid_t obj, const char *name, uint64_t *v);
int ckpt_attr_read_i64(hid_t obj, const char *name, long long *v);
int ckpt_attr_read_f64(hid_t obj, const char *name, double *v);
int ckpt_attr_read_i64s(hid_t obj, const char *name, long long *v, size_t n);
/* Caller frees; NULL when absent. */
char *ckpt_attr_read_string(hid_t obj, const char *name);

/* HDF5 prints its error stack on every failed call; the readers probe and
 * treat failures themselves, so they silence it around those calls. */
typedef struct ckpt_h5_quiet {
    H5E_auto2_t func;
    void *client;
} ckpt_h5_quiet_t;
void ckpt_h5_quiet_begin(ckpt_h5_quiet_t *q);
void ckpt_h5_quiet_end(const ckpt_h5_quiet_t *q);
/* Opens an existing file read-only with ckpt_fapl(parallel) and HDF5's
 * error stack silenced: a negative id when HDF5 cannot open it (truncated,
 * not HDF5). Collective when parallel. */
hid_t ckpt_open_read(const char *path, int parallel, const mpi_hints_t *hints);

/* Everything a checkpoint holds besides the tensors, as read back. */
typedef struct ckpt_meta {
    char *format, *fabula_version, *checksum_name, *config, *sched_type, *rng_algorithm;
    long long version;
    long long step, optimizer_step, tokens_seen;
    long long world_size, dp_size, ep_size, edp_size, zero_stage, tp_size, pp_size;
    long long ntensors;             /* parameters (each stored 3 times) */
    long long parameters;           /* elements over all parameters */
    double next_lr;
    long long fp16_enabled, fp16_dynamic, bf16_enabled;
    double loss_scale;
    int has_scaler_state;           /* the four fields below were saved */
    long long scaler_cur_iter, scaler_last_overflow_iter, scaler_cur_hysteresis;
    long long rng_seed, rng_next_step;
    step_plan_state_t data;         /* deferred points at `deferred` */
    long long data_seed;
    int64_t *deferred;
} ckpt_meta_t;

/* Collective in a parallel file (every rank calls it with the same
 * arguments): the root attributes and the small datasets. */
void ckpt_meta_write(hid_t file, const ckpt_target_t *t, const ckpt_progress_t *p, hid_t dxpl);
/* Reads what ckpt_meta_write wrote (the same calls on every rank in a
 * parallel file). Returns 0, or -1 with why[] set when something is missing
 * (damaged file). The format name and version are read first and checked by
 * the caller. */
int ckpt_meta_read(hid_t file, ckpt_meta_t *m, char *why, size_t why_len);
void ckpt_meta_free(ckpt_meta_t *m);

#endif
