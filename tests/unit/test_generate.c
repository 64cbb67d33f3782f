/* Generation's parts (docs/generate.md): the decode-attention op against
 * the packed attention_fwd on the same sequence (GQA included), and its
 * 16-bit CPU wrapper against the fp32 op; the KV-cache
 * decoder's logits against model_forward's over the whole sequence, dense
 * and MoE; sampling (repetition penalty, temperature, top-k, top-p, the
 * draw) on hand-made logits against distributions worked out by hand; the
 * UTF-8 streamer on multi-byte characters split across pushes and on
 * ill-formed bytes (the U+FFFD counts are Python's
 * bytes.decode("utf-8", "replace")). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "infer/decoder.h"
#include "infer/sample.h"
#include "infer/utf8_stream.h"
#include "model/model.h"
#include "ops.h"
#include "rng.h"
#include "util/error.h"

#include "testlib.h"

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * fb_uniform_hash(seed, i) - 1.0f;
}

/* Rows past..T-1 of attention_fwd over one sample of T rows against
 * decode_attention of those rows against the cache of all T. */
static void decode_attention_case(int T, int past, int H, int KV, int hd)
{
    const ops_t *o = ops_cpu();
    const size_t nq = (size_t)T * H * hd, nk = (size_t)T * KV * hd;
    float *q = fb_malloc(nq * 4), *k = fb_malloc(nk * 4), *v = fb_malloc(nk * 4), *ref = fb_malloc(nq * 4);
    float *lse = fb_malloc((size_t)T * H * 4), *got = fb_malloc(nq * 4);
    fill(q, nq, 1 + T);
    fill(k, nk, 2 + T);
    fill(v, nk, 3 + T);
    const int32_t cu[2] = {0, T};
    o->attention_fwd((fb_act *)ref, lse, (fb_act *)q, (fb_act *)k, (fb_act *)v, cu, 1, T, H, KV, hd);
    const int n = T - past;
    const size_t row = (size_t)H * hd;
    o->decode_attention((fb_act *)got, (fb_act *)(q + past * row), (fb_act *)k, (fb_act *)v, n, past, H, KV, hd);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * row; i++)
        worst = fmax(worst, fabs((double)got[i] - ref[past * row + i]));
    EXPECT(worst <= 1e-6, "T %d past %d H %d KV %d hd %d: max |decode - attention_fwd| %g", T, past, H, KV, hd,
           worst);
    free(q), free(k), free(v), free(ref), free(lse), free(got);
}

/* The 16-bit CPU table's decode_attention: its bf16 inputs widened, the
 * fp32 op, the output rounded once (within bf16's half-ulp, 2^-9 relative). */
static void decode_attention_16(int T, int past, int H, int KV, int hd)
{
    const ops_t *o = ops_cpu(), *h = ops_cpu16(FB_DTYPE_BF16);
    const int n = T - past;
    const size_t nq = (size_t)n * H * hd, nk = (size_t)T * KV * hd;
    float *q = fb_malloc(nq * 4), *k = fb_malloc(nk * 4), *v = fb_malloc(nk * 4), *ref = fb_malloc(nq * 4);
    float *got = fb_malloc(nq * 4);
    fb_act *q16 = h->alloc(nq * 2), *k16 = h->alloc(nk * 2), *v16 = h->alloc(nk * 2), *o16 = h->alloc(nq * 2);
    fill(q, nq, 11);
    fill(k, nk, 12);
    fill(v, nk, 13);
    h->to_act(q16, q, nq);
    h->to_act(k16, k, nk);
    h->to_act(v16, v, nk);
    h->act_to_f32(q, q16, nq); /* the fp32 reference sees the same rounded inputs */
    h->act_to_f32(k, k16, nk);
    h->act_to_f32(v, v16, nk);
    o->decode_attention((fb_act *)ref, (fb_act *)q, (fb_act *)k, (fb_act *)v, n, past, H, KV, hd);
    h->decode_attention(o16, q16, k16, v16, n, past, H, KV, hd);
    h->act_to_f32(got, o16, nq);
    int ok = 1;
    for (size_t i = 0; i < nq; i++)
        ok &= fabs((double)got[i] - ref[i]) <= fabs(ref[i]) * 0x1p-8 + 1e-30;
    EXPECT(ok, "bf16 decode_attention T %d past %d: not the fp32 op's output rounded", T, past);
    h->release(q16), h->release(k16), h->release(v16), h->release(o16);
    free(q), free(k), free(v), free(ref), free(got);
}

static void test_decode_attention(void)
{
    decode_attention_16(21, 19, 4, 2, 8);
    decode_attention_case(13, 12, 4, 2, 8);   /* GQA, the last row alone */
    decode_attention_case(13, 10, 4, 2, 8);   /* three rows at once */
    decode_attention_case(40, 39, 6, 1, 16);  /* one kv head for all */
    decode_attention_case(40, 39, 4, 4, 16);  /* plain multi-head */
    decode_attention_case(1, 0, 2, 1, 4);     /* the first position */
    decode_attention_case(600, 598, 8, 2, 64); /* long enough for the threaded path */
}

/* The decoder's logits after every prefix (a prefill of `prefill` tokens,
 * then one token a step) against model_forward's logits rows. */
static void decoder_case(const char *what, const char *const *sets, int nsets)
{
    config_t cfg;
    config_load(&cfg, NULL, 0, sets, nsets, 1, 0);
    const model_config_t *mc = &cfg.model;
    const int T = 24, V = mc->vocab_size, prefill = 7;
    model_t *m = model_create(mc, ops_cpu(), T);
    model_init_weights(m, 99);
    int32_t tokens[24], pos[24], targets[24], cu[2] = {0, T};
    for (int t = 0; t < T; t++) {
        tokens[t] = (int32_t)(fb_hash2(5, t) % 256);
        pos[t] = t;
        targets[t] = -1;
    }
    model_input_t in = {tokens, pos, targets, cu, T, 1, NULL, 0};
    model_scales_t sc = {.lm_denominator = 1, .mb_weight = 1};
    model_stats_t st;
    model_set_keep_logits(m, 1);
    model_forward(m, &in, &sc, &st);
    float *full = fb_malloc((size_t)T * V * 4), *lg = fb_malloc((size_t)V * 4);
    model_get_logits(m, full);
    decoder_t *d = decoder_create(m, T);
    double worst = 0, scale = 0;
    for (int t = prefill - 1; t < T; t++) {
        if (t == prefill - 1)
            decoder_append(d, tokens, prefill, lg);
        else
            decoder_append(d, tokens + t, 1, lg);
        for (int v = 0; v < V; v++) {
            worst = fmax(worst, fabs((double)lg[v] - full[(size_t)t * V + v]));
            scale = fmax(scale, fabs(full[(size_t)t * V + v]));
        }
    }
    EXPECT(decoder_len(d) == T, "%s: %d tokens in the cache", what, decoder_len(d));
    EXPECT(worst <= 1e-5, "%s: max |KV-cache logit - full forward logit| %g (logits up to %g)", what, worst, scale);
    /* a second continuation from a truncated cache reads the same rows */
    decoder_truncate(d, prefill);
    decoder_append(d, tokens + prefill, 1, lg);
    double again = 0;
    for (int v = 0; v < V; v++)
        again = fmax(again, fabs((double)lg[v] - full[(size_t)prefill * V + v]));
    EXPECT(again <= 1e-5, "%s: after truncate, max diff %g", what, again);
    printf("  decoder %-28s max |diff| %.3g over logits up to %.3g\n", what, worst, scale);
    decoder_free(d);
    model_free(m);
    free(full), free(lg);
    config_free(&cfg);
}

static void test_decoder(void)
{
    const char *dense[] = {"model.hidden_size=64", "model.intermediate_size=96", "model.num_local_experts=0",
                           "model.num_attention_heads=4", "model.num_key_value_heads=2"};
    decoder_case("dense, GQA 4/2", dense, 5);
    const char *moe[] = {"model.hidden_size=64", "model.intermediate_size=96", "model.num_local_experts=4",
                         "model.num_experts_per_tok=2", "model.capacity_factor=0", "model.num_attention_heads=4",
                         "model.num_key_value_heads=1", "model.num_hidden_layers=3", "model.moe_layer_freq=2"};
    decoder_case("MoE 4x top-2, GQA 4/1", moe, 9);
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-12; }

static void test_sampling(void)
{
    double p[4];
    sample_params_t greedy = {0, 0, 1, 1};
    float a[4] = {1, 3, 2, 0};
    EXPECT(sample_next(a, 4, &greedy, NULL, 0.5, p) == 1, "greedy: the largest logit");
    float tie[3] = {2, 5, 5};
    EXPECT(sample_next(tie, 3, &greedy, NULL, 0.5, p) == 1, "greedy: the lowest id of equal logits");

    /* temperature 2: softmax of [0.5, 1.5, 1, 0] */
    sample_params_t temp = {2, 0, 1, 1};
    float b[4] = {1, 3, 2, 0};
    sample_distribution(b, 4, &temp, NULL, p);
    double z = exp(0.5) + exp(1.5) + exp(1.0) + 1.0;
    EXPECT(close_to(p[0], exp(0.5) / z) && close_to(p[1], exp(1.5) / z) && close_to(p[2], exp(1.0) / z) &&
               close_to(p[3], 1.0 / z),
           "temperature 2: %g %g %g %g", p[0], p[1], p[2], p[3]);

    /* top-k 2 keeps logits 3 and 2 */
    sample_params_t topk = {1, 2, 1, 1};
    float c[4] = {1, 3, 2, 0};
    sample_distribution(c, 4, &topk, NULL, p);
    z = exp(3.0) + exp(2.0);
    EXPECT(p[0] == 0 && p[3] == 0 && close_to(p[1], exp(3.0) / z) && close_to(p[2], exp(2.0) / z),
           "top-k 2: %g %g %g %g", p[0], p[1], p[2], p[3]);
    /* a tie with the k-th value stays in (transformers: remove < k-th) */
    float c2[4] = {3, 2, 2, 0};
    sample_distribution(c2, 4, &topk, NULL, p);
    z = exp(3.0) + 2 * exp(2.0);
    EXPECT(p[3] == 0 && close_to(p[0], exp(3.0) / z) && close_to(p[1], exp(2.0) / z) && close_to(p[2], p[1]),
           "top-k 2 with a tie: %g %g %g %g", p[0], p[1], p[2], p[3]);

    /* top-p on probabilities 0.5, 0.3, 0.15, 0.05 */
    const double q[4] = {0.5, 0.3, 0.15, 0.05};
    float d[4];
    sample_params_t topp = {1, 0, 0.75, 1};
    for (int i = 0; i < 4; i++)
        d[i] = (float)log(q[i]);
    sample_distribution(d, 4, &topp, NULL, p);
    /* 1 - 0.75 = 0.25: 0.05 and 0.15 (total 0.2) go, 0.3 would make 0.5 */
    EXPECT(fabs(p[0] - 0.625) < 1e-6 && fabs(p[1] - 0.375) < 1e-6 && p[2] == 0 && p[3] == 0,
           "top-p 0.75: %g %g %g %g", p[0], p[1], p[2], p[3]);
    topp.top_p = 0.9;
    for (int i = 0; i < 4; i++)
        d[i] = (float)log(q[i]);
    sample_distribution(d, 4, &topp, NULL, p);
    EXPECT(fabs(p[0] - 0.5 / 0.95) < 1e-6 && fabs(p[1] - 0.3 / 0.95) < 1e-6 && fabs(p[2] - 0.15 / 0.95) < 1e-6 &&
               p[3] == 0,
           "top-p 0.9: %g %g %g %g", p[0], p[1], p[2], p[3]);
    topp.top_p = 0.01;
    for (int i = 0; i < 4; i++)
        d[i] = (float)log(q[i]);
    sample_distribution(d, 4, &topp, NULL, p);
    EXPECT(p[0] == 1.0 && p[1] == 0, "top-p 0.01 keeps the most likely token: %g %g", p[0], p[1]);

    /* repetition penalty 2 on ids 0 and 1: [2, -1, 0.5, 1.5] -> [1, -2, 0.5, 1.5] */
    const uint8_t seen[4] = {1, 1, 0, 0};
    float e[4] = {2, -1, 0.5f, 1.5f};
    sample_params_t rep = {0, 0, 1, 2};
    EXPECT(sample_next(e, 4, &rep, seen, 0.5, p) == 3, "greedy with the penalty: id 3");
    EXPECT(e[0] == 1 && e[1] == -2 && e[2] == 0.5f && e[3] == 1.5f, "penalised logits %g %g %g %g", e[0], e[1],
           e[2], e[3]);
    float f[4] = {2, -1, 0.5f, 1.5f};
    rep.temperature = 1;
    sample_distribution(f, 4, &rep, seen, p);
    z = exp(1.0) + exp(-2.0) + exp(0.5) + exp(1.5);
    EXPECT(close_to(p[0], exp(1.0) / z) && close_to(p[1], exp(-2.0) / z) && close_to(p[3], exp(1.5) / z),
           "penalty then softmax: %g %g %g %g", p[0], p[1], p[2], p[3]);

    /* the inverse-CDF draw in id order */
    const double w[3] = {0.25, 0, 0.75};
    EXPECT(sample_draw(w, 3, 0.0) == 0 && sample_draw(w, 3, 0.2499) == 0 && sample_draw(w, 3, 0.25) == 2 &&
               sample_draw(w, 3, 0.9999) == 2,
           "draws of [0.25, 0, 0.75]");
}

/* The writes the streamer makes, each recorded separately. */
typedef struct sink {
    uint8_t buf[256];
    size_t n;
    int writes;
    size_t ends[32];
} sink_t;

static int sink_write(void *ctx, const uint8_t *b, size_t n)
{
    sink_t *s = ctx;
    memcpy(s->buf + s->n, b, n);
    s->n += n;
    s->ends[s->writes++] = s->n;
    return 0;
}

/* pushes `in` cut at cuts[0..ncut) then flushes; expects `want` */
static void stream_case(const char *what, const char *in, size_t len, const size_t *cuts, int ncut, const char *want,
                        size_t wlen)
{
    sink_t s = {{0}, 0, 0, {0}};
    utf8_stream_t us;
    utf8_stream_init(&us, sink_write, &s);
    size_t at = 0;
    for (int i = 0; i <= ncut; i++) {
        size_t to = i < ncut ? cuts[i] : len;
        utf8_stream_push(&us, (const uint8_t *)in + at, to - at);
        at = to;
    }
    utf8_stream_flush(&us);
    int ok = s.n == wlen && !memcmp(s.buf, want, wlen);
    /* no write ends inside a character: the next byte is never a continuation byte */
    for (int i = 0; i < s.writes; i++)
        ok &= s.ends[i] == s.n || (s.buf[s.ends[i]] & 0xC0) != 0x80;
    EXPECT(ok, "utf-8 stream %s: %zu bytes out in %d writes", what, s.n, s.writes);
}

static void test_utf8_stream(void)
{
    const size_t c1[] = {1}, c2[] = {2}, c3[] = {1, 2, 3};
    stream_case("e-acute split 1+1", "\xC3\xA9", 2, c1, 1, "\xC3\xA9", 2);
    stream_case("euro split 1+2", "\xE2\x82\xAC", 3, c1, 1, "\xE2\x82\xAC", 3);
    stream_case("euro split 2+1", "\xE2\x82\xAC", 3, c2, 1, "\xE2\x82\xAC", 3);
    stream_case("emoji split 1+1+1+1", "\xF0\x9F\x98\x80", 4, c3, 3, "\xF0\x9F\x98\x80", 4);
    stream_case("ascii around a split", "a\xE2\x82\xAC" "b", 5, c2, 1, "a\xE2\x82\xAC" "b", 5);
    /* ill-formed: U+FFFD per maximal subpart */
    stream_case("C3 then A", "\xC3" "A", 2, c1, 1, "\xEF\xBF\xBD" "A", 4);
    stream_case("truncated euro at the end", "x\xE2\x82", 3, c2, 1, "x\xEF\xBF\xBD", 4);
    stream_case("a surrogate ED A0 80", "\xED\xA0\x80", 3, c1, 1, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9);
    stream_case("F0 9F 98 then A", "\xF0\x9F\x98" "A", 4, c2, 1, "\xEF\xBF\xBD" "A", 4);
    stream_case("overlong C0 AF", "\xC0\xAF", 2, c1, 1, "\xEF\xBF\xBD\xEF\xBF\xBD", 6);
    stream_case("FF", "\xFF", 1, NULL, 0, "\xEF\xBF\xBD", 3);
    stream_case("a lone continuation byte", "\x80" "a", 2, NULL, 0, "\xEF\xBF\xBD" "a", 4);
}

int main(void)
{
    test_decode_attention();
    test_decoder();
    test_sampling();
    test_utf8_stream();
    printf("test_generate: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
