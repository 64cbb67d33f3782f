/* The UTF-8 streamer (infer/utf8_stream.h), on the well-formed byte
 * sequences of Unicode's Table 3-7. */
#include "infer/utf8_stream.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static const uint8_t FFFD[3] = {0xEF, 0xBF, 0xBD};

void utf8_stream_init(utf8_stream_t *s, int (*write)(void *ctx, const uint8_t *bytes, size_t n), void *ctx)
{
    memset(s, 0, sizeof *s);
    s->write = write;
    s->ctx = ctx;
}

/* Length of the sequence lead byte b starts and the range of its second
 * byte; 0 for a byte no well-formed sequence starts with. */
static int lead(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0)
            *lo = 0xA0;
        else if (b == 0xED)
            *hi = 0x9F;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0)
            *lo = 0x90;
        else if (b == 0xF4)
            *hi = 0x8F;
        return 4;
    }
    return 0;
}

static void emit(utf8_stream_t *s, const uint8_t *p, size_t n)
{
    if (n && !s->failed && s->write(s->ctx, p, n) != 0)
        s->failed = 1;
}

/* Converts in[0..n) into out (room for 3n bytes: each input byte gives at
 * most 3 output bytes); at_end 0 keeps an incomplete tail in s->held. */
static size_t convert(utf8_stream_t *s, const uint8_t *in, size_t n, uint8_t *out, int at_end)
{
    size_t i = 0, w = 0;
    s->nheld = 0;
    while (i < n) {
        uint8_t lo, hi;
        const int len = lead(in[i], &lo, &hi);
        if (len == 0) {
            memcpy(out + w, FFFD, 3);
            w += 3;
            i++;
            continue;
        }
        int j = 1;
        while (j < len && i + j < n) {
            const uint8_t c = in[i + j];
            if (c < (j == 1 ? lo : 0x80) || c > (j == 1 ? hi : 0xBF))
                break;
            j++;
        }
        if (j == len) {
            memcpy(out + w, in + i, (size_t)len);
            w += (size_t)len;
        } else if (i + j == n && !at_end) {
            /* a prefix of a well-formed sequence that later bytes may complete */
            memcpy(s->held, in + i, (size_t)j);
            s->nheld = j;
        } else {
            memcpy(out + w, FFFD, 3);
            w += 3;
        }
        i += (size_t)j;
    }
    return w;
}

static void run(utf8_stream_t *s, const uint8_t *bytes, size_t n, int at_end)
{
    const size_t total = (size_t)s->nheld + n;
    uint8_t *in = fb_malloc(total ? total : 1), *out = fb_malloc(3 * total + 1);
    memcpy(in, s->held, (size_t)s->nheld);
    if (n)
        memcpy(in + s->nheld, bytes, n);
    emit(s, out, convert(s, in, total, out, at_end));
    free(in);
    free(out);
}

void utf8_stream_push(utf8_stream_t *s, const uint8_t *bytes, size_t n) { run(s, bytes, n, 0); }

void utf8_stream_flush(utf8_stream_t *s) { run(s, NULL, 0, 1); }
