/* The validation loss, overall and per genre (train/evaluate.h). */
#include "train/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/comm.h"
#include "train/pipeline.h"

enum { NG = BYTETOK_NGENRES };

/* One validation forward; under pp through this stage, between its input's
 * arrival and its output's departure (as the step's, on the model of
 * micro-batch 0). */
static void forward_one(model_t *model, pipeline_t *pipe, const model_input_t *in, const model_scales_t *sc,
                        model_stats_t *st)
{
    if (!pipe) {
        model_forward(model, in, sc, st);
        return;
    }
    /* chunk by chunk (interleaved stages); the loss is the last chunk's */
    double lm_sum = 0.0;
    long ntargets = 0;
    for (int c = 0; c < pipeline_chunks(pipe); c++) {
        if (pipeline_has_prev(pipe, c))
            pipeline_recv_input(pipe, 0, c, in->T);
        model_forward(pipeline_chunk_model(pipe, 0, c), in, sc, st);
        if (pipeline_has_next(pipe, c))
            pipeline_send_output(pipe, 0, c, in->T);
        lm_sum += st->lm_sum;
        ntargets += st->ntargets;
    }
    st->lm_sum = lm_sum;
    st->ntargets = ntargets;
}

static void evaluate_run(model_t *model, pipeline_t *pipe, comm_t *pp, data_source_t *src, batch_t *batch,
                         int64_t n, comm_t *dp, eval_result_t *out)
{
    const int rank = comm_rank(dp), world = comm_size(dp);
    if (n > src->n)
        n = src->n;
    const int64_t rounds = (n + world - 1) / world;
    /* lm_sum, targets, then per genre: lm_sum, targets, samples. One
     * allreduce; the first two are summed as they were before the genres
     * were added, so the overall loss keeps its digits. */
    double sums[2 + 3 * NG];
    memset(sums, 0, sizeof sums);
    /* the split's stratified order, not its file order: the first n
     * samples in file order are one novel's */
    const int64_t *order = data_source_eval_order(src);
    for (int64_t r = 0; r < rounds; r++) {
        const int64_t at = r * world + rank;
        const int have = at < n;
        const int64_t id = have ? order[at] : 0;
        data_source_batch(src, batch, &id, have ? &src->lens[id] : NULL, have);
        const batch_t *b = batch;
        model_input_t in = {b->tokens, b->positions, b->targets, b->cu_seqlens, b->T, b->nseq, NULL, 0};
        model_scales_t sc = {.lm_denominator = 1.0, .mb_weight = 1.0, .training = 0};
        model_stats_t st;
        forward_one(model, pipe, &in, &sc, &st);
        sums[0] += st.lm_sum;
        sums[1] += (double)st.ntargets;
        if (have) {
            const int g = src->genres[id] < NG ? src->genres[id] : GENRE_UNKNOWN;
            sums[2 + 3 * g] += st.lm_sum;
            sums[3 + 3 * g] += (double)st.ntargets;
            sums[4 + 3 * g] += 1.0;
        }
    }
    comm_allreduce(dp, sums, 2 + 3 * NG, COMM_F64, COMM_SUM);
    if (pipe) {
        /* the losses are the last stage's (the others' sums are 0): every
         * stage logs the same figures */
        pipeline_end_step(pipe);
        comm_allreduce(pp, sums, 2 + 3 * NG, COMM_F64, COMM_SUM);
    }
    memset(out, 0, sizeof *out);
    out->lm_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    out->ppl = exp(out->lm_loss);
    out->samples = (long)n;
    out->targets = sums[1];
    for (int g = 0; g < NG; g++) {
        out->genre_targets[g] = sums[3 + 3 * g];
        out->genre_samples[g] = (long)sums[4 + 3 * g];
        out->genre_lm_loss[g] = sums[3 + 3 * g] > 0 ? sums[2 + 3 * g] / sums[3 + 3 * g] : NAN;
    }
}

void evaluate_split(model_t *model, data_source_t *src, batch_t *batch, int64_t n, comm_t *dp, eval_result_t *out)
{
    evaluate_run(model, NULL, NULL, src, batch, n, dp, out);
}

void evaluate_split_pipeline(pipeline_t *pipe, comm_t *pp, data_source_t *src, batch_t *batch, int64_t n,
                             comm_t *dp, eval_result_t *out)
{
    evaluate_run(pipeline_model(pipe, 0), pipe, pp, src, batch, n, dp, out);
}

void evaluate_json(json_t *record, const eval_result_t *r)
{
    if (isfinite(r->ppl))
        json_object_set_new(record, "valid_ppl", json_real(r->ppl));
    json_t *g = json_object();
    for (int i = 0; i < NG; i++)
        if (r->genre_targets[i] > 0)
            json_object_set_new(g, bytetok_genre_name(i), json_real(r->genre_lm_loss[i]));
    json_object_set_new(record, "valid_genre_lm_loss", g);
}

void evaluate_print(long step, const eval_result_t *r)
{
    printf("step %ld | validation lm loss %.4f | ppl %.2f |", step, r->lm_loss, r->ppl);
    const char *sep = "";
    for (int i = 0; i < NG; i++)
        if (r->genre_targets[i] > 0) {
            printf("%s %s %.4f", sep, bytetok_genre_name(i), r->genre_lm_loss[i]);
            sep = ",";
        }
    printf("\n");
    fflush(stdout);
}
