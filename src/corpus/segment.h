/* The segment type of a sample: how much of its text is speech. A heuristic
 * on quotation marks and dialogue verbs, measured on the sample's text
 * (docs/prep.md, "Segment types"):
 *
 *   units  words (a run of ASCII or other non-CJK letters/digits) plus
 *          CJK characters (code points from U+2E80 up, one unit each);
 *          punctuation and blanks are not units
 *   q      share of units inside quotation marks: “…” 「…」 『…』 (nested
 *          pairs counted), or between straight quotes " / ＂ (toggled); the
 *          state resets at every line end (a paragraph), and a closing mark
 *          with no opening one marks the units since the line's previous
 *          quotation mark (or its start) as quoted: a window can start
 *          inside a quotation
 *   v      dialogue verbs per 1000 units: the English words said, says,
 *          asked, asks, replied, answered, cried, exclaimed, whispered,
 *          shouted, muttered, remarked, inquired, enquired, demanded,
 *          retorted (any case), and 道 說 说 問 问 曰 directly followed
 *          (after optional blanks) by ： : “ 「 『 or "
 *
 *   dialogue     q >= 0.5
 *   mixed        0.2 <= q < 0.5
 *   description  q < 0.05 and v < 1    (no speech: scenery, exposition;
 *                                        also a text without any unit)
 *   narrative    otherwise              (prose with a little speech) */
#ifndef FABULA_DATA_SEGMENT_H
#define FABULA_DATA_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

enum segment_type {
    SEGMENT_NARRATIVE = 0,
    SEGMENT_DIALOGUE = 1,
    SEGMENT_DESCRIPTION = 2,
    SEGMENT_MIXED = 3,
    SEGMENT_NTYPES
};

typedef struct segment_measure {
    long units;  /* words + CJK characters */
    long quoted; /* units inside quotation marks */
    long verbs;  /* dialogue verbs */
} segment_measure_t;

/* Measures text[0..n) (any bytes; invalid UTF-8 is skipped). */
void segment_measure(const uint8_t *text, size_t n, segment_measure_t *m);

/* The type the thresholds above give to a measure. */
int segment_type_of(const segment_measure_t *m);

/* segment_type_of(segment_measure(text)). */
int segment_classify(const uint8_t *text, size_t n);

/* "narrative", "dialogue", "description", "mixed"; NULL out of range. */
const char *segment_name(int type);

#endif
