#include "tokenizer/bytelevel.h"

static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

uint32_t bytelevel_char(uint8_t b)
{
    if (printable(b))
        return b;
    if (b <= 32)
        return 256u + b;           /* 0..32   -> U+0100..U+0120 */
    if (b <= 160)
        return 256u + 33 + (b - 127u); /* 127..160 -> U+0121..U+0142 */
    return 256u + 67;              /* 173 (soft hyphen) -> U+0143 */
}

int bytelevel_byte(uint32_t cp)
{
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    if (cp <= 256 + 32)
        return (int)(cp - 256);
    if (cp <= 256 + 66)
        return (int)(cp - 256 - 33 + 127);
    if (cp == 256 + 67)
        return 173;
    return -1;
}

int bytelevel_char_utf8(uint8_t b, char out[2])
{
    uint32_t cp = bytelevel_char(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

long bytelevel_decode(const char *s, size_t n, uint8_t *out)
{
    const uint8_t *p = (const uint8_t *)s;
    long m = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        /* Every character of the table is below U+0800: one or two bytes. */
        if (p[i] < 0x80) {
            cp = p[i];
            i += 1;
        } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
            cp = (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F);
            if (cp < 0x80)
                return -1;
            i += 2;
        } else {
            return -1;
        }
        int b = bytelevel_byte(cp);
        if (b < 0)
            return -1;
        out[m++] = (uint8_t)b;
    }
    return m;
}
