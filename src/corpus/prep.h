/* `fabula prep`: novels (.json/.jsonl) to one corpus HDF5 file
 * (docs/prep.md, docs/corpus-format.md). Collective: every rank calls
 * prep_run with the same options; each reads and tokenizes its share of the
 * inputs, and all write the file together through MPI-IO. The datasets do
 * not depend on the number of ranks. */
#ifndef FABULA_DATA_PREP_H
#define FABULA_DATA_PREP_H

#include <stdint.h>

#include "parallel/mpi_io.h"

/* What one sample holds (--split, docs/prep.md "Sample units"): windows of
 * the whole novel, or of one chapter, or of one scene; a chapter or scene
 * no longer than max_seq_len is one sample. */
typedef enum prep_unit { PREP_UNIT_WINDOWS = 0, PREP_UNIT_CHAPTERS, PREP_UNIT_SCENES } prep_unit_t;
#define PREP_NUNITS 3
/* The unit without --split (docs/prep.md argues the choice). */
#define PREP_DEFAULT_UNIT PREP_UNIT_CHAPTERS

/* "windows", "chapters", "scenes": the --split values, and the corpus file's
 * sample_unit attribute. */
const char *prep_unit_name(prep_unit_t u);
/* The unit named `s`; -1 when it names none. */
int prep_unit_parse(const char *s);

typedef struct prep_options {
    const char *const *inputs;  /* files or directories */
    int ninputs;
    const char *tokenizer;      /* tokenizer_load spec ("bytes", a file) */
    const char *output;         /* the .h5 file */
    int max_seq_len, overlap, min_seq_len;
    prep_unit_t unit;           /* what a sample holds */
    double valid_fraction;      /* share of novels held out, [0, 1) */
    uint64_t seed;
    int strict;                 /* a malformed record is fatal (exit 3) */
    int force;                  /* replace an existing output */
    int quiet;                  /* no progress lines (the summary is printed) */
    const mpi_hints_t *mpi_info; /* MPI-IO hints for the output file (--mpi-info); NULL: none */
} prep_options_t;

/* Runs prep; returns FB_EXIT_OK or ends the job with the documented code:
 * 2 usage (bad option value, output exists without force), 3 input data
 * (no usable novel, no sample, malformed record with strict, empty input
 * directory), 4 I/O. A failed run leaves no output file and no temporary
 * file behind. */
int prep_run(const prep_options_t *opt);

#endif
