/* DeepSpeed's csv_monitor layout: one CSV file per scalar tag in one
 * directory, named after the tag with '/' and ' ' turned into '_'
 * (loss.csv, time_forward.csv, moe_layers_0_aux.csv), each a header line
 * "step,<tag>" and one "step,value" row per step the tag was logged. One
 * file per tag rather than one wide table, because tags come and go (the
 * validation loss on eval steps, the rank statistics on print steps, the
 * genres present in a step): a wide table would need a fixed column set. */
#ifndef FABULA_TBOARD_TB_CSV_H
#define FABULA_TBOARD_TB_CSV_H

#include <jansson.h>

typedef struct tb_csv tb_csv_t;

/* Writes into the existing directory `dir`. A run that starts at
 * `first_step` first drops from every CSV file there the rows of steps
 * >= first_step, logged by an earlier process past the checkpoint this one
 * resumes from (or, from step 1, by a run started over), so each file reads
 * as one run.
 * I/O failures end the job with FB_EXIT_IO naming the file. */
tb_csv_t *tb_csv_open(const char *dir, long first_step);
/* Integers as integers, reals with 9 significant digits (as metrics.jsonl). */
void tb_csv_scalar(tb_csv_t *c, const char *tag, long step, const json_t *leaf, double value);
void tb_csv_close(tb_csv_t *c);

/* The file name of a tag ("a/b c" -> "a_b_c.csv"), in buf. */
void tb_csv_file_name(const char *tag, char *buf, size_t n);

#endif
