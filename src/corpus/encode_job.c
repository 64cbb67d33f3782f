/* corpus/encode_job.h: `fabula tokenizer encode`'s job. */
#include "corpus/encode_job.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/novels.h"
#include "io/atomic_file.h"
#include "parallel/world.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

int encode_job_run(const encode_job_t *job)
{
    tokenizer_t *t = tokenizer_load(job->tokenizer);
    novel_set_t set;
    novels_load(&set, job->input);
    token_vec_t *ids = fb_calloc((size_t)set.n, sizeof *ids);
    int nthreads = omp_get_max_threads();

    double t0 = parallel_wtime();
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < set.n; i++)
        tokenizer_encode(t, set.novels[i].content, set.novels[i].len, &ids[i]);
    double secs = parallel_wtime() - t0;

    size_t ntok = 0;
    for (int i = 0; i < set.n; i++) {
        if (ids[i].n > UINT32_MAX)
            fb_fatal(FB_EXIT_DATA, "%s: novel %d has more than 2^32 tokens", job->input, i + 1);
        ntok += ids[i].n;
    }
    int bad = 0;
    if (job->verify)
        for (int i = 0; i < set.n; i++) {
            size_t len;
            uint8_t *back = tokenizer_decode(t, ids[i].ids, ids[i].n, &len);
            size_t wlen = set.novels[i].len;
            const uint8_t *want = set.novels[i].content;
            uint8_t *expected = NULL;
            if (tokenizer_is_lossy(t))
                want = expected = tokenizer_expected_text(t, want, wlen, &wlen);
            if (len != wlen || memcmp(back, want, len) != 0) {
                fprintf(stderr, "fabula: error: novel %d (%s): decode(encode(text)) differs from the text\n", i + 1,
                        set.novels[i].title ? set.novels[i].title : "untitled");
                bad++;
            }
            free(expected);
            free(back);
        }
    size_t nbytes = 4 * ((size_t)set.n + ntok);
    uint8_t *buf = fb_malloc(nbytes ? nbytes : 1), *p = buf;
    for (int i = 0; i < set.n; i++) {
        put_u32(p, (uint32_t)ids[i].n);
        p += 4;
        for (size_t k = 0; k < ids[i].n; k++, p += 4)
            put_u32(p, (uint32_t)ids[i].ids[k]);
    }
    atomic_write_file(job->output, buf, nbytes);
    double mbs = secs > 0 ? set.total_bytes / secs / 1e6 : 0.0;
    printf("fabula: tokenizer encode: %d novels, %zu bytes -> %zu tokens (%.3f bytes/token) with %s (%s, vocab %d)\n",
           set.n, set.total_bytes, ntok, ntok ? (double)set.total_bytes / (double)ntok : 0.0, tokenizer_source(t),
           tokenizer_kind(t), tokenizer_vocab_size(t));
    printf("fabula: tokenizer encode: %.3f s, %.2f MB/s on %d thread%s = %.2f MB/s per thread\n", secs, mbs,
           nthreads, nthreads == 1 ? "" : "s", mbs / nthreads);
    if (job->verify)
        printf("fabula: tokenizer encode: verify: %d of %d novels %s\n", set.n - bad, set.n,
               tokenizer_is_lossy(t) ? "decode to their normalized text exactly" : "round-trip exactly");
    printf("fabula: tokenizer encode: wrote %s\n", job->output);
    for (int i = 0; i < set.n; i++)
        token_vec_free(&ids[i]);
    free(ids);
    free(buf);
    novels_free(&set);
    tokenizer_free(t);
    return bad ? FB_EXIT_INTERNAL : FB_EXIT_OK;
}
