/* The window rule of windows.h (docs/data.md, "Windows") applied to a token
 * stream that arrives in pieces, so that a novel never has to be held as one
 * token array: with W = seq_len - 1 and S = W - overlap, window k of a novel
 * with content tokens c[0..L) is [g] + c[k*S, min(k*S + W, L)), the last
 * window is the first that reaches the end, and a window shorter than
 * max(min_seq_len, 2) tokens is dropped (only a last window can be).
 *
 * Memory: at most W + (the largest pushed piece) tokens. */
#ifndef FABULA_DATA_WINDOW_STREAM_H
#define FABULA_DATA_WINDOW_STREAM_H

#include <stddef.h>
#include <stdint.h>

/* Receives each kept window, genre token first; the array is only valid
 * during the call. */
typedef void (*window_emit_fn)(void *ctx, const int32_t *tokens, int64_t len);

typedef struct window_stream {
    int64_t width;    /* W */
    int64_t stride;   /* S */
    int64_t keep_min; /* max(min_seq_len, 2) */
    int32_t *buf;     /* [g] + the content tokens from the current window's start */
    int64_t n, cap;   /* tokens in buf (genre token included) */
    int64_t content;  /* content tokens pushed since begin */
    window_emit_fn emit;
    void *ctx;
    int64_t n_emitted, n_dropped; /* since init */
    /* Since init: the pieces (begin .. end) with content, and those longer
     * than W content tokens, which were cut into several windows. */
    int64_t n_pieces, n_pieces_windowed;
} window_stream_t;

/* Checks the parameters (FB_EXIT_USAGE naming `--max-seq-len`, `--overlap`,
 * `--min-seq-len` via the option names given) and sets up an empty stream. */
void window_stream_init(window_stream_t *ws, int seq_len, int overlap, int min_seq_len, window_emit_fn emit,
                        void *ctx, const char *const names[3]);

/* Starts a piece (a novel, or a chapter or scene of one: the windows never
 * cross from one piece to the next) whose windows begin with `genre_token`. */
void window_stream_begin(window_stream_t *ws, int32_t genre_token);

/* Appends content tokens, emitting every window that is now known not to be
 * the last one. */
void window_stream_push(window_stream_t *ws, const int32_t *ids, size_t n);

/* Ends the piece: emits (or drops) its last window. A piece without any
 * content token has no window. */
void window_stream_end(window_stream_t *ws);

void window_stream_free(window_stream_t *ws);

#endif
