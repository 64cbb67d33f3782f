/* A TensorBoard event file: TFRecord records (length, masked CRC-32C of
 * the length, an Event message, masked CRC-32C of the message), the first
 * one the file version "brain.Event:2". Scalars go as Summary simple_value
 * (float), histograms as HistogramProto. */
#ifndef FABULA_TBOARD_TB_EVENTS_H
#define FABULA_TBOARD_TB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "tboard/pb.h"

typedef struct tb_events tb_events_t;

/* Creates a new file in the existing directory `dir`, named as TensorBoard
 * names them, events.out.tfevents.<seconds>.<host>.<pid>.0, with <seconds>
 * past every event file already there, so that TensorBoard (which reads a
 * directory's files in name order) sees this file's events last. I/O
 * failures end the job with FB_EXIT_IO naming the file. */
tb_events_t *tb_events_open(const char *dir);
const char *tb_events_path(const tb_events_t *w);

/* SessionLog START at `step`: TensorBoard drops the events of every file
 * before this one at steps >= `step`, so a resumed run that redoes steps
 * after its checkpoint replaces them rather than doubling them. */
void tb_events_session_start(tb_events_t *w, long step);

/* One event holding the scalars of a step: begin, any number of scalars,
 * end (which writes and flushes it). */
void tb_events_scalars_begin(tb_events_t *w, long step);
void tb_events_scalar(tb_events_t *w, const char *tag, double value);
void tb_events_scalars_end(tb_events_t *w);

/* One histogram event from a tb_hist accumulator (sums, exts): the buckets
 * from the first non-empty one to the last. An empty accumulator writes
 * nothing. */
void tb_events_histogram(tb_events_t *w, long step, const char *tag, const double *sums, const double *exts);

void tb_events_close(tb_events_t *w);

/* The TFRecord framing of `n` bytes of payload into `out` (n + 16 bytes). */
void tb_record_frame(const void *payload, size_t n, unsigned char *out);

#endif
