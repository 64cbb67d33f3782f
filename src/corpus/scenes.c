#include "corpus/scenes.h"

#include <string.h>

#include "corpus/chapters.h"
#include "util/error.h"

/* The multi-byte marks of rule 3, UTF-8. */
static const char *const WIDE_MARKS[] = {
    "\xC2\xB7",     /* · */
    "\xE2\x80\xA2", /* • */
    "\xE2\x80\x93", /* – */
    "\xE2\x80\x94", /* — */
    "\xE2\x80\x95", /* ― */
    "\xE2\x80\xBB", /* ※ */
    "\xE2\x81\x82", /* ⁂ */
    "\xE2\x97\x8B", /* ○ */
    "\xE2\x97\x8F", /* ● */
    "\xE2\x97\x87", /* ◇ */
    "\xE2\x97\x86", /* ◆ */
    "\xE2\x96\xA1", /* □ */
    "\xE2\x96\xA0", /* ■ */
    "\xE2\x98\x86", /* ☆ */
    "\xE2\x98\x85", /* ★ */
    "\xE2\x9D\x96", /* ❖ */
    "\xEF\xBC\x8A", /* ＊ */
    "\xEF\xBC\x83", /* ＃ */
    "\xEF\xBD\x9E", /* ～ */
};

/* Bytes of the mark at s[0..n), 0 when none starts there. */
static size_t mark_len(const uint8_t *s, size_t n)
{
    if (s[0] && strchr("*#~=-_", s[0]))
        return 1;
    for (size_t i = 0; i < sizeof WIDE_MARKS / sizeof *WIDE_MARKS; i++) {
        size_t k = strlen(WIDE_MARKS[i]);
        if (k <= n && memcmp(s, WIDE_MARKS[i], k) == 0)
            return k;
    }
    return 0;
}

int scene_break_line(const uint8_t *line, size_t n)
{
    size_t b, len = chapter_line_trim(line, n, &b);
    if (len == 0 || len > SCENE_BREAK_MAX_BYTES)
        return 0;
    const uint8_t *s = line + b;
    for (size_t i = 0; i < len;) {
        size_t k = mark_len(s + i, len - i);
        if (!k)
            k = chapter_blank_len(s + i, len - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1; /* trimmed, non-empty, so it begins with a mark */
}

static void push(size_t **starts, size_t *cap, size_t *count, size_t at)
{
    if (*count == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *starts = fb_realloc(*starts, *cap * sizeof **starts);
    }
    (*starts)[(*count)++] = at;
}

size_t scene_breaks_find(const uint8_t *text, size_t n, size_t **starts, size_t *cap)
{
    size_t count = 0;
    int prev_blank = 0;          /* the line before the current one is blank */
    size_t candidate = SIZE_MAX; /* a break line that needs a blank line after it */
    for (size_t pos = 0; pos <= n;) {
        const uint8_t *nl = pos < n ? memchr(text + pos, '\n', n - pos) : NULL;
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t b, len = chapter_line_trim(text + pos, end - pos, &b);
        if (candidate != SIZE_MAX && len == 0)
            push(starts, cap, &count, candidate);
        candidate = len > 0 && prev_blank && scene_break_line(text + pos, end - pos) ? pos : SIZE_MAX;
        prev_blank = len == 0;
        if (!nl)
            break;
        pos = end + 1;
    }
    if (candidate != SIZE_MAX) /* the last line, followed by the end of the text */
        push(starts, cap, &count, candidate);
    return count;
}
