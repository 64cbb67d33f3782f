/* Chapter headings in a novel's text, where prep puts <|chapter_sep|>.
 *
 * A line is a heading when (docs/prep.md, "Chapter headings"):
 *  1. it is the first non-blank line of the text, or it follows at least two
 *     blank lines (blank: only spaces, tabs, CR, FF, VT or U+3000);
 *  2. with leading and trailing blanks removed it is 1..200 bytes long; and
 *  3. it begins with one of (PCRE2, UTF mode):
 *       第[0-9０-９一二三四五六七八九十百千万零〇○两兩]+[章回节節卷]
 *       (?i)(?:chapter|book|part)[ \t]+(?:[0-9]+|[ivxlcdm]+|the[ \t]+\p{L}+|NUMBER)
 *           not followed by a letter or digit; NUMBER is a number word
 *           one..nineteen, or twenty..ninety with an optional -one..-nine
 *       [IVXLC]+\.   followed by a blank or the end of the line
 *                    ("II. THE RED-HEADED LEAGUE"; upper case only)
 * The separator goes at the start of the heading line, so that the heading
 * text follows it. Text that is not valid UTF-8 never matches but is fine. */
#ifndef FABULA_DATA_CHAPTERS_H
#define FABULA_DATA_CHAPTERS_H

#include <stddef.h>
#include <stdint.h>

/* Longest heading line (trimmed) that is still taken for a heading. */
#define CHAPTER_HEADING_MAX_BYTES 200

typedef struct chapter_finder chapter_finder_t;

/* The compiled patterns; one per thread. */
chapter_finder_t *chapter_finder_new(void);
void chapter_finder_free(chapter_finder_t *cf);

/* Whether one line (no line end; leading/trailing blanks allowed) matches
 * rule 3 after trimming, within the length limit of rule 2. */
int chapter_finder_is_heading(chapter_finder_t *cf, const uint8_t *line, size_t n);

/* Length of the blank character at s[0..n): an ASCII blank other than the
 * line end (1) or U+3000 IDEOGRAPHIC SPACE (3), else 0. */
size_t chapter_blank_len(const uint8_t *s, size_t n);

/* The line[0..n) without its leading and trailing blanks (the blanks of
 * rule 1, U+3000 included): its start in *begin, its length returned.
 * Scene breaks (scenes.h) use the same rule. */
size_t chapter_line_trim(const uint8_t *line, size_t n, size_t *begin);

/* Byte offsets of the heading lines of text[0..n), ascending, in
 * (*starts)[0..count); *starts and *cap are a buffer grown as needed (start with
 * NULL/0, free() it). Returns count. */
size_t chapter_finder_find(chapter_finder_t *cf, const uint8_t *text, size_t n, size_t **starts, size_t *cap);

#endif
