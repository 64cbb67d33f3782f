#include "corpus/utf8_guard.h"

#include "util/error.h"

static int is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

/* A marker is U+10FF00..U+10FFFF: F4 8F BC..BF 80..BF. */
static int is_marker(const uint8_t *s, size_t n)
{
    return n >= 4 && s[0] == 0xF4 && s[1] == 0x8F && s[2] >= 0xBC && s[2] <= 0xBF && is_cont(s[3]);
}

int utf8_guard_seqlen(const uint8_t *s, size_t n)
{
    if (n == 0)
        return 0;
    uint8_t b = s[0];
    if (b < 0x80)
        return 1;
    /* Allowed range of the second byte for each lead byte excludes overlong
     * forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4). */
    int len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < (size_t)len || s[1] < lo || s[1] > hi)
        return 0;
    for (int k = 2; k < len; k++)
        if (!is_cont(s[k]))
            return 0;
    return len;
}

long utf8_guard_wrap(const uint8_t *in, size_t n, uint8_t **out, size_t *out_n)
{
    long bad = 0;
    int collision = 0;
    for (size_t i = 0; i < n;) {
        int k = utf8_guard_seqlen(in + i, n - i);
        if (k == 0) {
            bad++;
            i++;
        } else {
            if (k == 4 && is_marker(in + i, n - i))
                collision = 1;
            i += (size_t)k;
        }
    }
    *out = NULL;
    *out_n = 0;
    if (bad == 0)
        return 0;
    if (collision)
        return -1;
    uint8_t *buf = fb_malloc(n + 3 * (size_t)bad);
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        int k = utf8_guard_seqlen(in + i, n - i);
        if (k == 0) {
            buf[j++] = 0xF4;
            buf[j++] = 0x8F;
            buf[j++] = (uint8_t)(0xBC | (in[i] >> 6));
            buf[j++] = (uint8_t)(0x80 | (in[i] & 0x3F));
            i++;
        } else {
            for (int m = 0; m < k; m++)
                buf[j++] = in[i++];
        }
    }
    *out = buf;
    *out_n = j;
    return bad;
}

size_t utf8_guard_unwrap(uint8_t *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (is_marker(s + i, n - i)) {
            s[j++] = (uint8_t)(((s[i + 2] & 0x03) << 6) | (s[i + 3] & 0x3F));
            i += 4;
        } else {
            s[j++] = s[i++];
        }
    }
    return j;
}
