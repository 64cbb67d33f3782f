/* The length curriculum and sequence-length warm-up (src/loader/curriculum.h)
 * and the loader's config keys (src/config/config_data_loader.c):
 * classes at the thresholds, phase lookup, largest-remainder quotas within
 * one sample of the mix, per-step draws within one sample of the target,
 * no repeat within an epoch, determinism and resume, warm-up lengths, the
 * defaults against the embedded default JSON, and bad values exiting 2
 * with the key named (config_load in a forked child). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "loader/curriculum.h"
#include "model/model.h"
#include "rng.h"
#include "testlib.h"
#include "model/config_resolve.h"

/* The defaults, spelled out here as the specification. */
static loader_config_t spec_config(void)
{
    loader_config_t l;
    memset(&l, 0, sizeof l);
    l.short_threshold = 1024;
    l.long_threshold = 2048;
    l.nphases = 3;
    l.phases[0] = (loader_phase_t){0.3, {0.8, 0.2, 0.0}};
    l.phases[1] = (loader_phase_t){0.7, {0.7, 0.0, 0.3}};
    l.phases[2] = (loader_phase_t){1.0, {0.0, 0.4, 0.6}};
    return l;
}

static void test_classes_and_phases(void)
{
    loader_config_t l = spec_config();
    const int64_t lens[6] = {1, 1023, 1024, 2047, 2048, 100000};
    const int want[6] = {LOADER_SHORT, LOADER_SHORT, LOADER_MEDIUM, LOADER_MEDIUM, LOADER_LONG, LOADER_LONG};
    for (int i = 0; i < 6; i++)
        EXPECT(curriculum_class(&l, lens[i]) == want[i], "len %lld", (long long)lens[i]);
    const double at[7] = {0.0, 0.2999, 0.3, 0.6999, 0.7, 1.0, 1.5};
    const int phase[7] = {0, 0, 1, 1, 2, 2, 2};
    for (int i = 0; i < 7; i++)
        EXPECT(curriculum_phase(&l, at[i]) == &l.phases[phase[i]], "progress %g", at[i]);
}

static void test_quota(void)
{
    for (int trial = 0; trial < 2000; trial++) {
        double m[3], sum = 0;
        for (int k = 0; k < 3; k++) {
            m[k] = (double)(fb_hash2(17, (uint64_t)(3 * trial + k)) % 1000) / 1000.0;
            if (trial % 7 == k)
                m[k] = 0.0;
            sum += m[k];
        }
        if (sum == 0.0) {
            m[0] = 1.0;
            sum = 1.0;
        }
        for (int k = 0; k < 3; k++)
            m[k] /= sum;
        int count = trial % 97, q[3];
        curriculum_quota(m, count, q);
        EXPECT(q[0] + q[1] + q[2] == count, "trial %d: quotas sum to %d, not %d", trial, q[0] + q[1] + q[2], count);
        for (int k = 0; k < 3; k++)
            EXPECT(fabs(q[k] - m[k] * count) < 1.0 + 1e-9, "trial %d class %d: %d for target %g", trial, k, q[k],
                   m[k] * count);
    }
    /* exact shares stay exact: 0.7 / 0.3 of 10 */
    int q[3];
    curriculum_quota((const double[3]){0.7, 0.0, 0.3}, 10, q);
    EXPECT(q[0] == 7 && q[1] == 0 && q[2] == 3, "0.7/0/0.3 of 10: %d %d %d", q[0], q[1], q[2]);
}

/* Lengths: NS short, NM medium, NL long, interleaved by a hash. */
static int64_t *class_lengths(int64_t ns, int64_t nm, int64_t nl, int64_t *n)
{
    *n = ns + nm + nl;
    int64_t *lens = malloc((size_t)*n * sizeof *lens);
    int64_t left[3] = {ns, nm, nl};
    for (int64_t i = 0; i < *n; i++) {
        int k = (int)(fb_hash2(5, (uint64_t)i) % 3);
        while (left[k] == 0)
            k = (k + 1) % 3;
        left[k]--;
        lens[i] = k == 0 ? 100 + i % 900 : k == 1 ? 1024 + i % 1000 : 2048 + i % 5000;
    }
    return lens;
}

/* Each step's draw within one sample of mix * count while every class has
 * samples left; counted from the lengths of the ids drawn. */
static void test_mix_per_step(void)
{
    loader_config_t l = spec_config();
    int64_t n;
    int64_t *lens = class_lengths(3000, 3000, 3000, &n);
    curriculum_t cur;
    curriculum_init(&cur, &l, lens, n, 77);
    const int count = 23;
    int64_t ids[23];
    const long steps = 100;
    for (long step = 0; step < steps; step++) {
        double progress = (double)step / (double)steps;
        int drawn[3], recount[3] = {0, 0, 0};
        curriculum_next(&cur, progress, count, ids, drawn);
        for (int i = 0; i < count; i++)
            recount[curriculum_class(&l, lens[ids[i]])]++;
        const loader_phase_t *ph = curriculum_phase(&l, progress);
        for (int k = 0; k < 3; k++) {
            EXPECT(recount[k] == drawn[k], "step %ld class %d: drawn %d, recount %d", step, k, drawn[k], recount[k]);
            EXPECT(fabs(recount[k] - ph->mix[k] * count) < 1.0 + 1e-9, "step %ld class %d: %d for target %g", step, k,
                   recount[k], ph->mix[k] * count);
        }
    }
    curriculum_free(&cur);
    free(lens);
}

/* Without replacement: each run of n draws from the epoch start is a
 * permutation of 0..n-1, even when classes run out early (fallback). */
static void test_epochs(void)
{
    loader_config_t l = spec_config();
    int64_t n;
    int64_t *lens = class_lengths(50, 31, 19, &n); /* n = 100 */
    curriculum_t cur;
    curriculum_init(&cur, &l, lens, n, 3);
    int64_t ids[10];
    for (int epoch = 0; epoch < 3; epoch++) {
        int seen[100] = {0};
        for (int step = 0; step < 10; step++) {
            /* the early phase only: long samples come by fallback alone */
            curriculum_next(&cur, 0.0, 10, ids, NULL);
            for (int i = 0; i < 10; i++)
                seen[ids[i]]++;
        }
        int once = 1;
        for (int i = 0; i < 100; i++)
            once &= seen[i] == 1;
        EXPECT(once, "epoch %d: a sample repeats or is missing", epoch);
        int64_t e, pos[3];
        curriculum_state_get(&cur, &e, pos);
        EXPECT(e == epoch && pos[0] == 50 && pos[1] == 31 && pos[2] == 19, "epoch %d: state %lld %lld/%lld/%lld",
               epoch, (long long)e, (long long)pos[0], (long long)pos[1], (long long)pos[2]);
    }
    curriculum_free(&cur);
    free(lens);
}

/* A class that runs out passes its share on, nearest length first. Worked
 * by hand from the rule in curriculum.h. */
static void test_fallback_order(void)
{
    loader_config_t l = spec_config();
    int64_t n, ids[10];
    int drawn[3];
    /* early (0.8/0.2/0) with 5 short: quota 8 short + 2 medium; the 3 short
     * missing go to medium (nearest), none to long -> 5 / 5 / 0 */
    int64_t *lens = class_lengths(5, 100, 100, &n);
    curriculum_t cur;
    curriculum_init(&cur, &l, lens, n, 1);
    curriculum_next(&cur, 0.0, 10, ids, drawn);
    EXPECT(drawn[0] == 5 && drawn[1] == 5 && drawn[2] == 0, "short exhausted: %d/%d/%d", drawn[0], drawn[1],
           drawn[2]);
    curriculum_free(&cur);
    free(lens);
    /* late (0/0.4/0.6) with 2 long: quota 4 medium + 6 long; the 4 long
     * missing go to medium, none to short -> 0 / 8 / 2 */
    lens = class_lengths(100, 100, 2, &n);
    curriculum_init(&cur, &l, lens, n, 1);
    curriculum_next(&cur, 0.9, 10, ids, drawn);
    EXPECT(drawn[0] == 0 && drawn[1] == 8 && drawn[2] == 2, "long exhausted: %d/%d/%d", drawn[0], drawn[1], drawn[2]);
    curriculum_free(&cur);
    free(lens);
}

/* Same seed, same draws; a resumed state continues identically. */
static void test_determinism_and_resume(void)
{
    loader_config_t l = spec_config();
    int64_t n;
    int64_t *lens = class_lengths(40, 40, 40, &n);
    curriculum_t a, b, c;
    curriculum_init(&a, &l, lens, n, 11);
    curriculum_init(&b, &l, lens, n, 11);
    curriculum_init(&c, &l, lens, n, 12);
    int64_t ia[16], ib[16], ic[16];
    int same = 1, differ = 0;
    for (int step = 0; step < 30; step++) {
        double progress = step / 30.0;
        curriculum_next(&a, progress, 16, ia, NULL);
        curriculum_next(&b, progress, 16, ib, NULL);
        curriculum_next(&c, progress, 16, ic, NULL);
        same &= memcmp(ia, ib, sizeof ia) == 0;
        differ |= memcmp(ia, ic, sizeof ia) != 0;
        if (step == 14) {
            /* resume b from a's state in a fresh object */
            int64_t e, pos[3];
            curriculum_state_get(&a, &e, pos);
            curriculum_free(&b);
            curriculum_init(&b, &l, lens, n, 11);
            curriculum_state_set(&b, e, pos);
        }
    }
    EXPECT(same, "same seed (and a resumed state) gives other draws");
    EXPECT(differ, "another seed gives the same draws");
    curriculum_free(&a);
    curriculum_free(&b);
    curriculum_free(&c);
    free(lens);
}

/* The warm-up rule, evaluated here in integer arithmetic. */
static int warmup_expect(int start, int L, long steps, long step)
{
    if (step >= steps || start >= L)
        return L;
    long raw_num = (long)start * steps + (long)(L - start) * step; /* raw = raw_num / steps */
    long len = raw_num / steps / 64 * 64;
    long lo = L < 64 ? L : 64;
    len = len < lo ? lo : len;
    return len > L ? L : (int)len;
}

static void test_warmup(void)
{
    loader_config_t l = spec_config();
    EXPECT(curriculum_max_len(&l, 4096, 0) == 4096, "disabled: %d", curriculum_max_len(&l, 4096, 0));
    l.warmup = 1;
    const int starts[4] = {256, 100, 1, 5000};
    const int Ls[3] = {4096, 1000, 48};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++) {
            l.warmup_start = starts[a];
            l.warmup_steps = 1000;
            int prev = 0;
            for (long step = 0; step <= 1200; step += 7) {
                int got = curriculum_max_len(&l, Ls[b], step);
                int want = warmup_expect(starts[a], Ls[b], 1000, step);
                EXPECT(got == want, "start %d L %d step %ld: %d, expected %d", starts[a], Ls[b], step, got, want);
                EXPECT(got >= prev, "not monotone at step %ld", step);
                EXPECT(got == Ls[b] || got % 64 == 0, "%d is not a multiple of 64", got);
                prev = got;
            }
        }
    l.warmup_start = 256;
    EXPECT(curriculum_max_len(&l, 4096, 0) == 256 && curriculum_max_len(&l, 4096, 1000) == 4096,
           "endpoints %d %d", curriculum_max_len(&l, 4096, 0), curriculum_max_len(&l, 4096, 1000));
    EXPECT(curriculum_effective_len(5000, 256) == 256 && curriculum_effective_len(100, 256) == 100, "effective len");
}

/* ---------------------------------------------------------------- config */

typedef struct sets {
    const char *const *set;
    int n;
} sets_t;

static void load_in_child(const void *arg)
{
    const sets_t *s = arg;
    if (!freopen("/dev/null", "w", stdout))
        _exit(98);
    config_t cfg;
    config_load(&cfg, NULL, 0, s->set, s->n, 1, 1);
    config_free(&cfg);
}

/* config_load with these --set overrides in a child: its exit status, its
 * stderr in err. */
static int run_config(const char *const *sets, int nsets, char *err, size_t errcap)
{
    const sets_t s = {sets, nsets};
    int rc = testlib_child_exit(load_in_child, &s, "test_curriculum.stderr");
    testlib_read_text("test_curriculum.stderr", err, errcap);
    return rc;
}

static void expect_error(const char *set, const char *key)
{
    char err[4096];
    const char *sets[1] = {set};
    int rc = run_config(sets, 1, err, sizeof err);
    EXPECT(rc == 2, "--set %s: exit %d, expected 2 (%s)", set, rc, err);
    EXPECT(strstr(err, key) != NULL, "--set %s: the message does not name '%s': %s", set, key, err);
}

static void test_config_errors(void)
{
    expect_error("data.sampler=roundrobin", "data.sampler");
    expect_error("data.packing=first_fit", "data.packing");
    expect_error("data.max_tokens_per_batch=127", "data.max_tokens_per_batch");
    expect_error("data.attention_cost=-0.5", "data.attention_cost");
    expect_error("data.curriculum.enabled=\"yes\"", "data.curriculum.enabled");
    expect_error("data.curriculum.short_threshold=0", "data.curriculum.short_threshold");
    expect_error("data.curriculum.long_threshold=1024", "data.curriculum.long_threshold");
    expect_error("data.curriculum.phases=[]", "data.curriculum.phases");
    expect_error("data.curriculum.phases=[1]", "data.curriculum.phases");
    expect_error("data.curriculum.phases=[{\"until\":0.5,\"short\":0.5,\"medium\":0.6},{\"until\":1.0,\"short\":1}]",
                 "data.curriculum.phases[0]");
    expect_error("data.curriculum.phases=[{\"until\":1.0,\"short\":1.5,\"medium\":-0.5}]",
                 "data.curriculum.phases[0].short");
    expect_error("data.curriculum.phases=[{\"until\":0.5,\"short\":1},{\"until\":0.4,\"short\":1},"
                 "{\"until\":1.0,\"short\":1}]",
                 "data.curriculum.phases[1].until");
    expect_error("data.curriculum.phases=[{\"until\":0.5,\"short\":1},{\"until\":0.9,\"long\":1}]",
                 "data.curriculum.phases[1].until");
    expect_error("data.curriculum.phases=[{\"short\":1}]", "data.curriculum.phases[0].until");
    expect_error("data.curriculum.phases=[{\"until\":1.0,\"short\":\"all\"}]", "data.curriculum.phases[0].short");
    expect_error("data.seq_len_warmup.start=0", "data.seq_len_warmup.start");
    expect_error("data.seq_len_warmup.steps=0", "data.seq_len_warmup.steps");
    /* within the 1e-6 tolerance: accepted */
    char err[4096];
    const char *ok[1] = {"data.curriculum.phases=[{\"until\":1.0,\"short\":0.3333333,\"medium\":0.3333333,"
                         "\"long\":0.3333339}]"};
    int rc = run_config(ok, 1, err, sizeof err);
    EXPECT(rc == 0, "ratios summing to 1 within 1e-6 refused: exit %d (%s)", rc, err);
}

/* Defaults against the embedded default JSON parsed here, and "auto". */
static void test_config_defaults(void)
{
    json_error_t e;
    json_t *d = json_loads(config_default_json(), 0, &e);
    EXPECT(d != NULL, "default JSON: %s", e.text);
    if (!d)
        return;
    json_t *data = json_object_get(d, "data");
    json_t *phases = json_object_get(json_object_get(data, "curriculum"), "phases");
    config_t cfg;
    config_load(&cfg, NULL, 0, NULL, 0, 1, 0);
    model_config_resolve(&cfg, 0);
    const loader_config_t *l = &cfg.loader;
    EXPECT(l->sampler == LOADER_SAMPLER_LPT && l->packing == LOADER_PACK_BEST_FIT, "sampler %d packing %d",
           l->sampler, l->packing);
    EXPECT(l->max_tokens_per_batch == cfg.micro_batch * cfg.data.seq_len, "max_tokens_per_batch %d, micro %d x %d",
           l->max_tokens_per_batch, cfg.micro_batch, cfg.data.seq_len);
    EXPECT(fabs(l->attention_cost - model_attention_cost(&cfg.model)) < 1e-18, "attention_cost %g",
           l->attention_cost);
    EXPECT(!l->curriculum && !l->warmup && l->warmup_start == 256 && l->warmup_steps == 1000, "flags");
    EXPECT(l->short_threshold == 1024 && l->long_threshold == 2048, "thresholds %d %d", l->short_threshold,
           l->long_threshold);
    EXPECT(l->nphases == (int)json_array_size(phases), "phases %d", l->nphases);
    static const char *const keys[3] = {"short", "medium", "long"};
    for (int i = 0; i < l->nphases && i < (int)json_array_size(phases); i++) {
        json_t *ph = json_array_get(phases, (size_t)i);
        EXPECT(l->phases[i].until == json_number_value(json_object_get(ph, "until")), "phase %d until", i);
        for (int k = 0; k < 3; k++)
            EXPECT(l->phases[i].mix[k] == json_number_value(json_object_get(ph, keys[k])), "phase %d %s", i, keys[k]);
    }
    /* the mixes */
    loader_config_t spec = spec_config();
    EXPECT(memcmp(spec.phases, l->phases, 3 * sizeof *l->phases) == 0, "default phases differ from the issue's");
    config_free(&cfg);
    json_decref(d);

    const char *sets[2] = {"train_micro_batch_size_per_gpu=3", "data.seq_len=100"};
    config_load(&cfg, NULL, 0, sets, 2, 1, 0);
    EXPECT(cfg.loader.max_tokens_per_batch == 300, "auto max_tokens_per_batch %d, expected 3 x 100",
           cfg.loader.max_tokens_per_batch);
    config_free(&cfg);
    const char *sets2[3] = {"data.sampler=uniform", "data.packing=sequential", "data.attention_cost=0"};
    config_load(&cfg, NULL, 0, sets2, 3, 1, 0);
    EXPECT(cfg.loader.sampler == LOADER_SAMPLER_UNIFORM && cfg.loader.packing == LOADER_PACK_SEQUENTIAL &&
               cfg.loader.attention_cost == 0.0,
           "explicit values");
    config_free(&cfg);
}

int main(void)
{
    test_classes_and_phases();
    test_quota();
    test_mix_per_step();
    test_epochs();
    test_fallback_order();
    test_determinism_and_resume();
    test_warmup();
    test_config_defaults();
    test_config_errors();
    remove("test_curriculum.stderr");
    printf("test_curriculum: %d checks, %d failures (classes, phases, quotas, per-step mix within 1 sample, "
           "epochs without replacement, fallback order, determinism and resume, warm-up, config defaults and errors)\n",
           checks, failures);
    return failures ? 1 : 0;
}
