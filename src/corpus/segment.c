#include "corpus/segment.h"

#include <string.h>
#include <strings.h>

#include "corpus/utf8_guard.h"

static const char *const DIALOGUE_WORDS[] = {
    "said", "says", "asked", "asks", "replied", "answered", "cried", "exclaimed", "whispered",
    "shouted", "muttered", "remarked", "inquired", "enquired", "demanded", "retorted",
};

/* 道 說 说 問 问 曰: speech verbs when a colon or an opening quote follows. */
static int is_cjk_speech_verb(uint32_t c)
{
    return c == 0x9053 || c == 0x8AAA || c == 0x8BF4 || c == 0x554F || c == 0x95EE || c == 0x66F0;
}

static int introduces_speech(uint32_t c)
{
    return c == 0xFF1A || c == ':' || c == 0x201C || c == 0x300C || c == 0x300E || c == '"';
}

static int is_blank(uint32_t c) { return c == ' ' || c == '\t' || c == 0x3000; }

/* Punctuation and symbol blocks that are not units. */
static int is_punct(uint32_t c)
{
    return (c >= 0xA0 && c <= 0xBF) || c == 0xD7 || c == 0xF7 || (c >= 0x2000 && c <= 0x206F) ||
           (c >= 0x3000 && c <= 0x303F) || (c >= 0xFE10 && c <= 0xFE1F) || (c >= 0xFE30 && c <= 0xFE4F) ||
           (c >= 0xFF00 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
           (c >= 0xFF5B && c <= 0xFF65);
}

static int is_word_char(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    return c < 0x2E80 && !is_punct(c);
}

static int is_cjk_unit(uint32_t c) { return c >= 0x2E80 && !is_punct(c); }

/* The code point at s[0..n) and its length in *len; invalid bytes give
 * UINT32_MAX with length 1. */
static uint32_t decode(const uint8_t *s, size_t n, int *len)
{
    int k = utf8_guard_seqlen(s, n);
    if (k == 0) {
        *len = 1;
        return UINT32_MAX;
    }
    *len = k;
    if (k == 1)
        return s[0];
    uint32_t c = s[0] & (0x7F >> k);
    for (int i = 1; i < k; i++)
        c = (c << 6) | (s[i] & 0x3F);
    return c;
}

static int is_dialogue_word(const uint8_t *w, size_t n)
{
    /* Every word of the list has 4 to 9 letters: most words stop here. */
    if (n < 4 || n > 9)
        return 0;
    for (size_t i = 0; i < sizeof DIALOGUE_WORDS / sizeof *DIALOGUE_WORDS; i++)
        if ((w[0] | 0x20) == DIALOGUE_WORDS[i][0] && strncasecmp((const char *)w, DIALOGUE_WORDS[i], n) == 0 &&
            DIALOGUE_WORDS[i][n] == '\0')
            return 1;
    return 0;
}

/* Whether the code point after text[pos..) (blanks skipped) introduces speech. */
static int speech_follows(const uint8_t *text, size_t n, size_t pos)
{
    while (pos < n) {
        int k;
        uint32_t c = decode(text + pos, n - pos, &k);
        if (!is_blank(c))
            return introduces_speech(c);
        pos += (size_t)k;
    }
    return 0;
}

void segment_measure(const uint8_t *text, size_t n, segment_measure_t *m)
{
    memset(m, 0, sizeof *m);
    int depth = 0, straight = 0; /* quotation state of the current line */
    long pending = 0;            /* units since the line's last quotation mark, outside quotes */
    size_t word_start = 0;
    int in_word = 0, word_ascii = 0;
    for (size_t pos = 0; pos <= n;) {
        int k = 1;
        uint32_t c = pos < n ? decode(text + pos, n - pos, &k) : UINT32_MAX;
        int word = pos < n && c != UINT32_MAX && is_word_char(c);
        if (in_word && !word) {
            if (word_ascii && is_dialogue_word(text + word_start, pos - word_start))
                m->verbs++;
            in_word = 0;
        }
        if (pos == n)
            break;
        if (word) {
            if (!in_word) {
                in_word = 1;
                word_ascii = 1;
                word_start = pos;
                m->units++;
                if (depth > 0 || straight)
                    m->quoted++;
                else
                    pending++;
            }
            if (c >= 0x80 || (c >= '0' && c <= '9'))
                word_ascii = 0;
        } else if (c == '\n') {
            depth = straight = 0;
            pending = 0;
        } else if (c == 0x201C || c == 0x300C || c == 0x300E) {
            depth++;
            pending = 0;
        } else if (c == 0x201D || c == 0x300D || c == 0x300F) {
            if (depth > 0)
                depth--;
            else
                m->quoted += pending;
            pending = 0;
        } else if (c == '"' || c == 0xFF02) {
            straight = !straight;
            pending = 0;
        } else if (c != UINT32_MAX && is_cjk_unit(c)) {
            m->units++;
            if (depth > 0 || straight)
                m->quoted++;
            else
                pending++;
            if (is_cjk_speech_verb(c) && speech_follows(text, n, pos + (size_t)k))
                m->verbs++;
        }
        pos += (size_t)k;
    }
}

int segment_type_of(const segment_measure_t *m)
{
    if (m->units == 0)
        return SEGMENT_DESCRIPTION;
    if (2 * m->quoted >= m->units)
        return SEGMENT_DIALOGUE;
    if (5 * m->quoted >= m->units)
        return SEGMENT_MIXED;
    if (20 * m->quoted < m->units && 1000 * m->verbs < m->units)
        return SEGMENT_DESCRIPTION;
    return SEGMENT_NARRATIVE;
}

int segment_classify(const uint8_t *text, size_t n)
{
    segment_measure_t m;
    segment_measure(text, n, &m);
    return segment_type_of(&m);
}

const char *segment_name(int type)
{
    static const char *const names[SEGMENT_NTYPES] = {"narrative", "dialogue", "description", "mixed"};
    return type >= 0 && type < SEGMENT_NTYPES ? names[type] : NULL;
}
