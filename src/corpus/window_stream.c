#include "corpus/window_stream.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void window_stream_init(window_stream_t *ws, int seq_len, int overlap, int min_seq_len, window_emit_fn emit,
                        void *ctx, const char *const names[3])
{
    if (seq_len < 2)
        fb_fatal(FB_EXIT_USAGE, "%s must be at least 2 (genre token + 1 token), got %d", names[0], seq_len);
    if (overlap < 0 || overlap > seq_len - 2)
        fb_fatal(FB_EXIT_USAGE, "%s must be in [0, %s - 2] = [0, %d] so that windows advance, got %d", names[1],
                 names[0], seq_len - 2, overlap);
    if (min_seq_len > seq_len)
        fb_fatal(FB_EXIT_USAGE, "%s (%d) must not exceed %s (%d)", names[2], min_seq_len, names[0], seq_len);
    memset(ws, 0, sizeof *ws);
    ws->width = seq_len - 1;
    ws->stride = seq_len - 1 - overlap;
    ws->keep_min = min_seq_len > 2 ? min_seq_len : 2;
    ws->emit = emit;
    ws->ctx = ctx;
    ws->cap = seq_len + 1024;
    ws->buf = fb_malloc((size_t)ws->cap * sizeof *ws->buf);
}

void window_stream_begin(window_stream_t *ws, int32_t genre_token)
{
    ws->buf[0] = genre_token;
    ws->n = 1;
    ws->content = 0;
}

void window_stream_push(window_stream_t *ws, const int32_t *ids, size_t n)
{
    while (n > 0) {
        /* Take in only what completes the current window plus one token:
         * the extra token proves the window is not the last. */
        int64_t room = 1 + ws->width + 1 - ws->n;
        int64_t take = (int64_t)n < room ? (int64_t)n : room;
        if (ws->n + take > ws->cap) {
            ws->cap = ws->n + take;
            ws->buf = fb_realloc(ws->buf, (size_t)ws->cap * sizeof *ws->buf);
        }
        memcpy(ws->buf + ws->n, ids, (size_t)take * sizeof *ids);
        ws->n += take;
        ws->content += take;
        ids += take;
        n -= (size_t)take;
        if (ws->n - 1 > ws->width) {
            /* More than W content tokens from this window's start: it is full
             * and not the last (k*S + W < L). */
            ws->emit(ws->ctx, ws->buf, 1 + ws->width);
            ws->n_emitted++;
            memmove(ws->buf + 1, ws->buf + 1 + ws->stride, (size_t)(ws->n - 1 - ws->stride) * sizeof *ws->buf);
            ws->n -= ws->stride;
        }
    }
}

void window_stream_end(window_stream_t *ws)
{
    if (ws->content == 0)
        return;
    ws->n_pieces++;
    ws->n_pieces_windowed += ws->content > ws->width;
    if (ws->n >= ws->keep_min) {
        ws->emit(ws->ctx, ws->buf, ws->n);
        ws->n_emitted++;
    } else {
        ws->n_dropped++;
    }
    ws->n = 1;
    ws->content = 0;
}

void window_stream_free(window_stream_t *ws)
{
    free(ws->buf);
    memset(ws, 0, sizeof *ws);
}
