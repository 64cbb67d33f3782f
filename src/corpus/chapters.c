#include "corpus/chapters.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The three heading forms of chapters.h, one alternation, anchored at the
 * start of the trimmed line. */
static const char HEADING_PATTERN[] =
    "(?:\xE7\xAC\xAC" /* 第 */
    "[0-9\xEF\xBC\x90-\xEF\xBC\x99" /* ０-９ */
    "\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89\xE5\x9B\x9B\xE4\xBA\x94" /* 一二三四五 */
    "\xE5\x85\xAD\xE4\xB8\x83\xE5\x85\xAB\xE4\xB9\x9D\xE5\x8D\x81" /* 六七八九十 */
    "\xE7\x99\xBE\xE5\x8D\x83\xE4\xB8\x87\xE9\x9B\xB6\xE3\x80\x87" /* 百千万零〇 */
    "\xE2\x97\x8B\xE4\xB8\xA4\xE5\x85\xA9]+" /* ○两兩 */
    "[\xE7\xAB\xA0\xE5\x9B\x9E\xE8\x8A\x82\xE7\xAF\x80\xE5\x8D\xB7])" /* 章回节節卷 */
    "|(?i:(?:chapter|book|part)[ \\t]+"
    "(?:[0-9]+|[ivxlcdm]+|the[ \\t]+\\p{L}+"
    "|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
    "(?:-(?:one|two|three|four|five|six|seven|eight|nine))?"
    "|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    "|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)"
    "(?![\\p{L}\\p{N}]))"
    "|(?:[IVXLC]+\\.(?:[ \\t]|$))";

struct chapter_finder {
    pcre2_code *code;
    pcre2_match_data *match;
};

chapter_finder_t *chapter_finder_new(void)
{
    chapter_finder_t *cf = fb_calloc(1, sizeof *cf);
    int err = 0;
    PCRE2_SIZE where = 0;
    cf->code = pcre2_compile((PCRE2_SPTR)HEADING_PATTERN, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_ANCHORED, &err, &where, NULL);
    if (!cf->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "pcre2_compile(chapter heading pattern)", (char *)msg);
    }
    cf->match = pcre2_match_data_create_from_pattern(cf->code, NULL);
    if (!cf->match)
        fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "pcre2_match_data_create_from_pattern", "out of memory");
    return cf;
}

void chapter_finder_free(chapter_finder_t *cf)
{
    if (!cf)
        return;
    pcre2_match_data_free(cf->match);
    pcre2_code_free(cf->code);
    free(cf);
}

size_t chapter_blank_len(const uint8_t *s, size_t n)
{
    if (n >= 1 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\r' || s[0] == '\f' || s[0] == '\v'))
        return 1;
    if (n >= 3 && s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80)
        return 3;
    return 0;
}

size_t chapter_line_trim(const uint8_t *line, size_t n, size_t *begin)
{
    size_t b = 0, e = n, k;
    while (b < e && (k = chapter_blank_len(line + b, e - b)) > 0)
        b += k;
    for (;;) {
        if (e > b && chapter_blank_len(line + e - 1, 1))
            e--;
        else if (e >= b + 3 && chapter_blank_len(line + e - 3, 3) == 3)
            e -= 3;
        else
            break;
    }
    *begin = b;
    return e - b;
}

int chapter_finder_is_heading(chapter_finder_t *cf, const uint8_t *line, size_t n)
{
    size_t b, len = chapter_line_trim(line, n, &b);
    if (len == 0 || len > CHAPTER_HEADING_MAX_BYTES)
        return 0;
    int rc = pcre2_match(cf->code, (PCRE2_SPTR)(line + b), len, 0, 0, cf->match, NULL);
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    fb_fail_call(FB_EXIT_INTERNAL, __FILE__, __LINE__, "pcre2_match(chapter heading)", (char *)msg);
}

size_t chapter_finder_find(chapter_finder_t *cf, const uint8_t *text, size_t n, size_t **starts, size_t *cap)
{
    size_t count = 0;
    int seen_text = 0; /* a non-blank line came before */
    int blank_run = 0; /* blank lines right before the current one */
    for (size_t pos = 0; pos <= n;) {
        const uint8_t *nl = pos < n ? memchr(text + pos, '\n', n - pos) : NULL;
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t b, len = chapter_line_trim(text + pos, end - pos, &b);
        if (len == 0) {
            blank_run++;
        } else {
            if ((!seen_text || blank_run >= 2) && chapter_finder_is_heading(cf, text + pos, end - pos)) {
                if (count == *cap) {
                    *cap = *cap ? 2 * *cap : 64;
                    *starts = fb_realloc(*starts, *cap * sizeof **starts);
                }
                (*starts)[count++] = pos;
            }
            seen_text = 1;
            blank_run = 0;
        }
        if (!nl)
            break;
        pos = end + 1;
    }
    return count;
}
