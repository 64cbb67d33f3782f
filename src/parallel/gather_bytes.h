/* Collecting one byte buffer from every rank on a root rank, in rank order,
 * without holding them all at once (the BPE trainer merges word counts this
 * way). Sizes may exceed 2 GiB: pieces stay under MPI's int counts. */
#ifndef FABULA_PARALLEL_GATHER_BYTES_H
#define FABULA_PARALLEL_GATHER_BYTES_H

#include <stddef.h>

/* On `root`: sink(ctx, r, buf_r, n_r) for r = 0, 1, ..., size-1 (its own
 * buffer included), each buffer valid during its call only. On the other
 * ranks: sends buf[0..n); sink is not called. Collective over the world. */
typedef void (*parallel_bytes_sink_fn)(void *ctx, int rank, const void *buf, size_t n);
void parallel_gather_bytes(const void *buf, size_t n, int root, parallel_bytes_sink_fn sink, void *ctx);

#endif
