/* The TensorBoard event files and csv_monitor files of a run
 * (docs/monitoring.md, "TensorBoard and CSV"): every numeric leaf of each
 * step's metrics record as a scalar, and every tensorboard.histogram_interval
 * steps a histogram of every parameter and its gradient by Hugging Face
 * name. Rank 0 writes; the histograms are collective. */
#ifndef FABULA_TRAIN_TRAIN_TBOARD_H
#define FABULA_TRAIN_TRAIN_TBOARD_H

#include <jansson.h>

#include "config/config.h"
#include "model/params.h"
#include "tboard/tb_csv.h"
#include "tboard/tb_events.h"
#include "zero/zero.h"

typedef struct train_tboard {
    const config_t *cfg;
    int active;             /* rank 0 */
    tb_events_t *events;    /* opened at the first step logged */
    tb_csv_t *csv;
    long step;              /* the step whose scalars are being written */
    param_table_t global;   /* every tensor of the model (histograms) */
    int have_global;
} train_tboard_t;

void train_tboard_open(train_tboard_t *t, const config_t *cfg, int active);
/* The tensorboard and csv_monitor folders the config enables, made now
 * (fb_fatal naming the path when one cannot be), so that a bad output_path
 * is found at start-up where every rank can agree on it, not at the first
 * step's record by rank 0 alone. */
void train_tboard_make_dirs(const config_t *cfg);
/* Rank 0, once per step, after the record is complete. The first call
 * creates the folders and files; a run that starts at step s (resumed)
 * marks its event file so that TensorBoard drops what earlier files logged
 * at steps >= s, and trims the CSV files likewise. */
void train_tboard_scalars(train_tboard_t *t, const json_t *record, long step);
/* Every rank, after the step's update: at the steps that are multiples of
 * tensorboard.histogram_interval, the histograms "params/<name>" and (when
 * `grads_valid`: the step was applied, not skipped) "grads/<name>", the
 * gradient as the optimizer used it (unscaled, clipped). Each rank bins the
 * part of each tensor in its ZeRO write range (the checkpoint's partition:
 * every element once), and one sum and one max reduction merge them. */
void train_tboard_histograms(train_tboard_t *t, zero_t *z, long step, int grads_valid);
void train_tboard_close(train_tboard_t *t);

#endif
