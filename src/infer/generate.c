/* The generation loop (infer/generate.h). */
#include "infer/generate.h"

#include <stdlib.h>
#include <string.h>

#include "infer/decode_threads.h"
#include "infer/utf8_stream.h"
#include "kernels_info.h"
#include "rng.h"
#include "util/error.h"
#include "util/timer.h"

/* Writes at once: a reader of the stream sees each token as it comes. */
static int write_file(void *ctx, const uint8_t *bytes, size_t n)
{
    FILE *f = ctx;
    return fwrite(bytes, 1, n, f) != n || fflush(f) != 0;
}

/* Uniform in [0, 1) with 53 bits, from the counter-based hash: the draws
 * depend on (seed, sample, step) only, not on threads or timing. */
static double uniform(uint64_t seed, int sample, int step)
{
    return (double)(fb_hash2(seed, ((uint64_t)sample << 32) | (uint32_t)step) >> 11) * (1.0 / 9007199254740992.0);
}

static int is_stop(const gen_options_t *o, int32_t id)
{
    for (int i = 0; i < o->nstop; i++)
        if (o->stop[i] == id)
            return 1;
    return 0;
}

int generate(decoder_t *d, const tokenizer_t *tok, const gen_options_t *o, FILE *out, gen_stats_t *st)
{
    const int V = decoder_vocab_size(d);
    FB_ASSERT(o->nprompt >= 1 && o->max_new_tokens >= 1 && o->nprompt + o->max_new_tokens <= decoder_max_len(d));
    memset(st, 0, sizeof *st);
    float *first = fb_malloc((size_t)V * sizeof *first), *logits = fb_malloc((size_t)V * sizeof *logits);
    double *probs = fb_malloc((size_t)V * sizeof *probs);
    uint8_t *seen = fb_malloc((size_t)V);
    int32_t *ids = fb_malloc((size_t)o->max_new_tokens * sizeof *ids);
    int failed = 0;

    double t0 = timer_now();
    decoder_truncate(d, 0);
    decoder_append(d, o->prompt, o->nprompt, first);
    st->prompt_tokens = o->nprompt;
    st->prefill_s = timer_now() - t0;
    decode_threads_t dt;
    decode_threads_init(&dt, o->threads, o->adapt_threads);

    for (int s = 0; s < o->num_samples && !failed; s++) {
        t0 = timer_now();
        decoder_truncate(d, o->nprompt);
        memcpy(logits, first, (size_t)V * sizeof *logits);
        memset(seen, 0, (size_t)V);
        for (int i = 0; i < o->nprompt; i++)
            if (o->prompt[i] >= 0 && o->prompt[i] < V)
                seen[o->prompt[i]] = 1;
        utf8_stream_t us;
        utf8_stream_init(&us, write_file, out);
        int n = 0;
        double cycle = -1.0; /* when the last decode step started */
        while (n < o->max_new_tokens) {
            const int32_t id = sample_next(logits, V, &o->sp, seen, uniform(o->seed, s, n), probs);
            ids[n++] = id;
            seen[id] = 1;
            if (is_stop(o, id))
                break;
            size_t len;
            uint8_t *bytes = tokenizer_decode(tok, &id, 1, &len);
            utf8_stream_push(&us, bytes, len);
            free(bytes);
            /* the last token's successor is never needed */
            if (n < o->max_new_tokens) {
                const double t1 = timer_now();
                if (cycle >= 0)
                    decode_threads_done(&dt, t1 - cycle);
                cycle = t1;
                const int threads = decode_threads_next(&dt);
                if (threads != kernels_cpu_threads())
                    kernels_cpu_set_threads(threads);
                decoder_append(d, &id, 1, logits);
            }
        }
        utf8_stream_flush(&us);
        failed |= us.failed || write_file(out, (const uint8_t *)"\n", 1);
        st->decoded += n;
        st->decode_s += timer_now() - t0;
        if (o->ids_out) {
            for (int i = 0; i < n; i++)
                failed |= fprintf(o->ids_out, i ? " %d" : "%d", ids[i]) < 0;
            failed |= fputc('\n', o->ids_out) == EOF;
        }
    }
    if (kernels_cpu_threads() != o->threads)
        kernels_cpu_set_threads(o->threads);
    st->decoded_at[0] = dt.tokens_at[0];
    st->decoded_at[1] = dt.tokens_at[1];
    free(first);
    free(logits);
    free(probs);
    free(seen);
    free(ids);
    return failed ? FB_EXIT_IO : 0;
}
