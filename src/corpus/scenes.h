/* Scene breaks in a novel's text: where `fabula prep --split scenes` ends a
 * sample inside a chapter (docs/prep.md, "Sample units").
 *
 * A line is a scene break when
 *  1. it follows a blank line and is followed by a blank line or the end of
 *     the text (so a row of '=' or '-' underlining a heading is not one);
 *  2. without its blanks (chapter_line_trim's) it is 1 to
 *     SCENE_BREAK_MAX_BYTES bytes long; and
 *  3. it is made only of blanks and these marks, at least one of them:
 *       * # ~ = - _   and   · • – — ― ※ ⁂ ○ ● ◇ ◆ □ ■ ☆ ★ ❖ ＊ ＃ ～
 *     ("* * *", "*****", "#", "◇◇◇", "——").
 * The break line opens the scene after it, as a heading opens its chapter.
 * Text that is not valid UTF-8 never matches. */
#ifndef FABULA_DATA_SCENES_H
#define FABULA_DATA_SCENES_H

#include <stddef.h>
#include <stdint.h>

/* Longest scene-break line (trimmed). */
#define SCENE_BREAK_MAX_BYTES 80

/* Whether one line (no line end) is made only of blanks and marks, with at
 * least one mark, within the length limit (rules 2 and 3). */
int scene_break_line(const uint8_t *line, size_t n);

/* Byte offsets of the scene-break lines of text[0..n), ascending, in
 * (*starts)[0..count); *starts and *cap are a buffer grown as needed (start
 * with NULL/0, free() it). Returns count. */
size_t scene_breaks_find(const uint8_t *text, size_t n, size_t **starts, size_t *cap);

#endif
