/* config_load: DeepSpeed's batch rule, --set parsing, merge order, "auto",
 * scheduler/optimizer/ZeRO defaults, validation errors (exit 2 naming the
 * key), unknown-key warnings and the effective config.
 *
 * Error cases run config_load in a forked child and check its exit status
 * and stderr. Expected values come from the identity or from the embedded
 * default parsed here with jansson, not from the code under test; DeepSpeed's
 * documented defaults are spelled out where they are the specification. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "testlib.h"
#include "zero/schedule.h"

#define DIR "test_config.d"

static char *write_file(const char *name, const char *text)
{
    static char paths[32][128];
    static int next;
    char *path = paths[next++ % 32];
    snprintf(path, 128, DIR "/%s", name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("cannot write %s: %s\n", path, strerror(errno));
        exit(99);
    }
    return path;
}

/* ---------------------------------------------------------------- child runs */

typedef struct result {
    int status;        /* exit status of the child (-1 if killed) */
    char err[8192];    /* its stderr */
    int batch[3];      /* train_batch_size, micro, gas when it succeeded */
} result_t;

typedef struct child_load {
    const char *const *files, *const *sets;
    int nfiles, nsets, world;
    int batch_fd; /* where the child writes its batch sizes */
} child_load_t;

static void load_in_child(const void *arg)
{
    const child_load_t *c = arg;
    if (!freopen("/dev/null", "w", stdout))
        _exit(98);
    config_t cfg;
    config_load(&cfg, c->files, c->nfiles, c->sets, c->nsets, c->world, 1);
    int b[3] = {cfg.train_batch_size, cfg.micro_batch, cfg.grad_accum};
    if (write(c->batch_fd, b, sizeof b) != (ssize_t)sizeof b)
        _exit(97);
    config_free(&cfg);
    fflush(stderr);
}

/* config_load in a child (verbose), so that errors (exit 2) can be observed. */
static void run_child(result_t *r, const char *const *files, int nfiles, const char *const *sets, int nsets, int world)
{
    int fd[2];
    if (pipe(fd) != 0) {
        perror("pipe");
        exit(99);
    }
    const child_load_t c = {files, sets, nfiles, nsets, world, fd[1]};
    r->status = testlib_child_exit(load_in_child, &c, DIR "/stderr.txt");
    close(fd[1]);
    memset(r->batch, 0, sizeof r->batch);
    ssize_t got = read(fd[0], r->batch, sizeof r->batch);
    (void)got;
    close(fd[0]);
    testlib_read_text(DIR "/stderr.txt", r->err, sizeof r->err);
}

/* Runs an error case: exit status 2 and every `needles` substring in stderr. */
static void expect_error(const char *what, const char *const *files, int nfiles, const char *const *sets, int nsets,
                         const char *needle1, const char *needle2)
{
    result_t r;
    run_child(&r, files, nfiles, sets, nsets, 1);
    EXPECT(r.status == 2, "%s: exit status %d, expected 2 (stderr: %s)", what, r.status, r.err);
    EXPECT(!needle1 || strstr(r.err, needle1), "%s: stderr lacks '%s': %s", what, needle1, r.err);
    EXPECT(!needle2 || strstr(r.err, needle2), "%s: stderr lacks '%s': %s", what, needle2, r.err);
}

static void expect_set_error(const char *set, const char *needle1, const char *needle2)
{
    const char *sets[1] = {set};
    expect_error(set, NULL, 0, sets, 1, needle1, needle2);
}

/* ---------------------------------------------------------------- helpers */

static json_t *default_tree(void)
{
    json_error_t e;
    json_t *d = json_loads(config_default_json(), 0, &e);
    if (!d) {
        printf("the embedded default does not parse: %d:%d: %s\n", e.line, e.column, e.text);
        exit(1);
    }
    return d;
}

/* jansson has no path getter: a small one for the tests ("a.b.c"). */
static json_t *tree_get(json_t *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *node = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
        node = json_object_get(node, tok);
    return node;
}

static double dnum(json_t *root, const char *path) { return json_number_value(tree_get(root, path)); }

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b)); }

static void load(config_t *cfg, const char *const *files, int nfiles, const char *const *sets, int nsets, int world)
{
    config_load(cfg, files, nfiles, sets, nsets, world, 0);
}


/* ---------------------------------------------------------------- batch */

/* The triple DeepSpeed's rule must produce, found by search over candidate
 * values rather than by division: the missing keys take every value in
 * 1..limit; gas is 1 when it is missing together with another key; none
 * given: the default's micro batch and gas. Returns the number of solutions
 * (1 = valid, 0 = error expected); "gas alone" returns 0. */
static int batch_expect(int ht, int t, int hm, int m, int hg, int g, int w, int dm, int dg, int out[3])
{
    if (!ht && !hm && !hg) {
        out[0] = dm * dg * w;
        out[1] = dm;
        out[2] = dg;
        return 1;
    }
    if (!ht && !hm)
        return 0;
    int gas_fixed_one = !hg && (!ht || !hm);
    int n = 0;
    for (int tt = ht ? t : 1; tt <= (ht ? t : 2048); tt++)
        for (int mm = hm ? m : 1; mm <= (hm ? m : 512); mm++)
            for (int gg = hg ? g : 1; gg <= (hg ? g : (gas_fixed_one ? 1 : 512)); gg++)
                if ((long)mm * gg * w == tt) {
                    n++;
                    out[0] = tt;
                    out[1] = mm;
                    out[2] = gg;
                }
    return n;
}

static void test_batch_rule(void)
{
    json_t *d = default_tree();
    int dm = (int)json_integer_value(json_object_get(d, "train_micro_batch_size_per_gpu"));
    int dg = (int)json_integer_value(json_object_get(d, "gradient_accumulation_steps"));
    json_decref(d);
    int cases = 0, errors = 0;
    static const int worlds[3] = {1, 2, 4};
    for (int wi = 0; wi < 3; wi++) {
        int w = worlds[wi];
        for (int mask = 0; mask < 8; mask++) {
            int ht = mask & 1, hm = (mask >> 1) & 1, hg = (mask >> 2) & 1;
            for (int t = 1; t <= (ht ? 12 : 1); t++)
                for (int m = 1; m <= (hm ? 4 : 1); m++)
                    for (int g = 1; g <= (hg ? 3 : 1); g++) {
                        char s[3][64];
                        const char *sets[3];
                        int ns = 0;
                        if (ht) {
                            snprintf(s[ns], 64, "train_batch_size=%d", t);
                            sets[ns] = s[ns];
                            ns++;
                        }
                        if (hm) {
                            snprintf(s[ns], 64, "train_micro_batch_size_per_gpu=%d", m);
                            sets[ns] = s[ns];
                            ns++;
                        }
                        if (hg) {
                            snprintf(s[ns], 64, "gradient_accumulation_steps=%d", g);
                            sets[ns] = s[ns];
                            ns++;
                        }
                        int want[3] = {0, 0, 0};
                        int n = batch_expect(ht, t, hm, m, hg, g, w, dm, dg, want);
                        result_t r;
                        run_child(&r, NULL, 0, sets, ns, w);
                        cases++;
                        if (n == 1) {
                            EXPECT(r.status == 0 && r.batch[0] == want[0] && r.batch[1] == want[1] &&
                                      r.batch[2] == want[2],
                                  "batch mask %d t=%d m=%d g=%d w=%d: got status %d (%d,%d,%d), want (%d,%d,%d): %s",
                                  mask, t, m, g, w, r.status, r.batch[0], r.batch[1], r.batch[2], want[0], want[1],
                                  want[2], r.err);
                        } else {
                            errors++;
                            EXPECT(n == 0, "batch search found %d solutions", n);
                            EXPECT(r.status == 2 && (strstr(r.err, "train_batch_size") ||
                                                    strstr(r.err, "train_micro_batch_size_per_gpu")),
                                  "batch mask %d t=%d m=%d g=%d w=%d: status %d, want 2 naming the keys: %s", mask, t,
                                  m, g, w, r.status, r.err);
                        }
                    }
        }
    }
    printf("batch rule: %d combinations over world sizes 1, 2, 4 (%d rejected), against a search of the identity\n",
           cases, errors);

    /* "auto" on batch keys = absent; the default's values only when the
     * user gives none of the three. */
    const char *files[1] = {write_file("auto_batch.json", "{\"train_batch_size\": \"auto\", "
                                                          "\"train_micro_batch_size_per_gpu\": \"auto\", "
                                                          "\"gradient_accumulation_steps\": \"auto\"}")};
    config_t cfg;
    load(&cfg, files, 1, NULL, 0, 2);
    EXPECT(cfg.micro_batch == dm && cfg.grad_accum == dg && cfg.train_batch_size == dm * dg * 2,
          "all-auto batch keys take the default's micro batch and gas: (%d,%d,%d)", cfg.train_batch_size,
          cfg.micro_batch, cfg.grad_accum);
    config_free(&cfg);
    const char *tb_only[2] = {write_file("tb_auto.json", "{\"train_batch_size\": 24, "
                                                         "\"train_micro_batch_size_per_gpu\": \"auto\"}")};
    load(&cfg, tb_only, 1, NULL, 0, 4);
    EXPECT(cfg.train_batch_size == 24 && cfg.grad_accum == 1 && cfg.micro_batch * 4 == 24,
          "train_batch_size alone ignores the default's micro batch: (%d,%d,%d)", cfg.train_batch_size,
          cfg.micro_batch, cfg.grad_accum);
    json_t *eff = json_loads(cfg.effective_json, 0, NULL);
    EXPECT(eff && json_integer_value(json_object_get(eff, "train_micro_batch_size_per_gpu")) == cfg.micro_batch &&
              json_integer_value(json_object_get(eff, "gradient_accumulation_steps")) == 1,
          "the effective config holds the inferred batch keys");
    json_decref(eff);
    config_free(&cfg);
}

/* ---------------------------------------------------------------- --set and merge */

static void test_sets_and_merge(void)
{
    json_t *d = default_tree();
    config_t cfg;
    {
        const char *sets[] = {"optimizer.params.lr=1e-4", "model.num_hidden_layers=3",
                              "optimizer.params.betas=[0.8, 0.99]", "run.run_dir=some/dir",
                              "data.tokenizer=bytes", "model.tie_word_embeddings=true", "model.num_hidden_layers=5"};
        load(&cfg, NULL, 0, sets, 7, 1);
        EXPECT(cfg.optim.lr == 1e-4, "--set real: lr %g", cfg.optim.lr);
        EXPECT(cfg.model.num_hidden_layers == 5, "--set integer, last one wins: %d", cfg.model.num_hidden_layers);
        EXPECT(cfg.optim.beta1 == 0.8 && cfg.optim.beta2 == 0.99, "--set array: betas %g %g", cfg.optim.beta1,
              cfg.optim.beta2);
        EXPECT(strcmp(cfg.run.run_dir, "some/dir") == 0, "--set bare string: %s", cfg.run.run_dir);
        EXPECT(cfg.model.tie_word_embeddings == 1, "--set boolean");
        /* Untouched keys keep the default. */
        EXPECT(cfg.model.hidden_size == (int)dnum(d, "model.hidden_size"), "untouched key keeps the default");
        config_free(&cfg);
    }
    {
        const char *sets[] = {"run.run_dir=2024", "run.seed=7"};
        load(&cfg, NULL, 0, sets, 2, 1);
        EXPECT(strcmp(cfg.run.run_dir, "2024") == 0, "--set of a string key keeps number-like text: %s",
              cfg.run.run_dir);
        EXPECT(cfg.run.seed == 7, "--set seed");
        config_free(&cfg);
    }
    {
        const char *sets[] = {"custom.deep.key=12", "run.run_dir=\"a b\""};
        load(&cfg, NULL, 0, sets, 2, 1);
        json_t *eff = json_loads(cfg.effective_json, 0, NULL);
        EXPECT(json_integer_value(tree_get(eff, "custom.deep.key")) == 12,
              "--set creates missing intermediate objects");
        EXPECT(strcmp(cfg.run.run_dir, "a b") == 0, "--set JSON string value: %s", cfg.run.run_dir);
        json_decref(eff);
        config_free(&cfg);
    }
    expect_set_error("model.hidden_size.x=1", "model.hidden_size", "not an object");
    expect_set_error("no_equals_sign", "no_equals_sign", "KEY=VALUE");
    expect_set_error("=5", "KEY=VALUE", NULL);
    expect_set_error("a..b=5", "a..b", NULL);

    /* Merge order: default < file A < file B < sets; objects merge deeply. */
    const char *a = write_file("a.json", "{\"model\": {\"hidden_size\": 256, \"num_hidden_layers\": 3},"
                                         " \"optimizer\": {\"params\": {\"lr\": 5e-4, \"betas\": [0.5, 0.6]}},"
                                         " \"scheduler\": {\"params\": {\"warmup_num_steps\": 7}}}");
    const char *b = write_file("b.json", "{\"model\": {\"hidden_size\": 64}, "
                                         "\"optimizer\": {\"params\": {\"betas\": [0.7, 0.8]}}}");
    const char *files[2] = {a, b};
    const char *sets[1] = {"model.num_hidden_layers=6"};
    load(&cfg, files, 2, sets, 1, 1);
    EXPECT(cfg.model.hidden_size == 64, "later file wins: hidden_size %d", cfg.model.hidden_size);
    EXPECT(cfg.model.num_hidden_layers == 6, "--set wins over files: %d", cfg.model.num_hidden_layers);
    EXPECT(cfg.optim.lr == 5e-4, "deep merge keeps file A's lr: %g", cfg.optim.lr);
    EXPECT(cfg.optim.beta1 == 0.7 && cfg.optim.beta2 == 0.8, "arrays replace: %g %g", cfg.optim.beta1,
          cfg.optim.beta2);
    EXPECT(cfg.optim.eps == dnum(d, "optimizer.params.eps") &&
              cfg.optim.weight_decay == dnum(d, "optimizer.params.weight_decay"),
          "same-family optimizer merges the default's params");
    EXPECT(cfg.model.num_attention_heads == (int)dnum(d, "model.num_attention_heads"), "default under both files");
    /* File A gives an optimizer and a scheduler: the default's schedule
     * (same type) merges with it. */
    EXPECT(cfg.sched.type == SCHED_WARMUP_DECAY_LR && cfg.sched.warmup_num_steps == 7,
          "scheduler of the same type merges: type %d warmup %ld", (int)cfg.sched.type, cfg.sched.warmup_num_steps);
    config_free(&cfg);
    json_decref(d);
    printf("--set parsing (numbers, arrays, booleans, bare and JSON strings, nested creation, errors) and merge order\n");
}

/* ---------------------------------------------------------------- auto */

static void test_auto(void)
{
    json_t *d = default_tree();
    const char *f = write_file("auto.json", "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", "
                                            "\"weight_decay\": \"auto\"}},"
                                            " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": "
                                            "{\"warmup_min_lr\": \"auto\", \"warmup_max_lr\": \"auto\", "
                                            "\"warmup_num_steps\": \"auto\"}},"
                                            " \"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": \"auto\"},"
                                            " \"gradient_clipping\": \"auto\","
                                            " \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": \"auto\"}}");
    const char *files[1] = {f};
    config_t cfg;
    load(&cfg, files, 1, NULL, 0, 1);
    EXPECT(cfg.optim.lr == dnum(d, "optimizer.params.lr"), "lr auto = default's lr: %g", cfg.optim.lr);
    EXPECT(cfg.optim.weight_decay == dnum(d, "optimizer.params.weight_decay"), "weight_decay auto = default's");
    EXPECT(cfg.sched.type == SCHED_WARMUP_LR, "user scheduler type replaces the default's");
    EXPECT(cfg.sched.warmup_max_lr == cfg.optim.lr, "warmup_max_lr auto = optimizer lr: %g", cfg.sched.warmup_max_lr);
    EXPECT(cfg.sched.warmup_min_lr == dnum(d, "scheduler.params.warmup_min_lr"), "warmup_min_lr auto = default's");
    EXPECT(cfg.sched.warmup_num_steps == (long)dnum(d, "scheduler.params.warmup_num_steps"),
          "warmup_num_steps auto = default's: %ld", cfg.sched.warmup_num_steps);
    EXPECT(cfg.sched.warmup_type == WARMUP_LOG, "warmup_type absent in a WarmupLR block = DeepSpeed's \"log\"");
    EXPECT(cfg.fp16.enabled == 0 && cfg.bf16_enabled == 0, "fp16/bf16 enabled auto = off");
    EXPECT(cfg.gradient_clipping == dnum(d, "gradient_clipping"), "gradient_clipping auto = default's");
    EXPECT(cfg.zero.reduce_bucket_size == 5e8, "reduce_bucket_size auto = DeepSpeed's 5e8 (the default has none)");
    json_t *eff = json_loads(cfg.effective_json, 0, NULL);
    EXPECT(eff && json_is_number(tree_get(eff, "optimizer.params.lr")) &&
              json_is_false(tree_get(eff, "fp16.enabled")),
          "no \"auto\" is left in the effective config");
    json_decref(eff);
    config_free(&cfg);

    result_t r;
    run_child(&r, files, 1, NULL, 0, 1);
    EXPECT(r.status == 0 && strstr(r.err, "note") && strstr(r.err, "optimizer.params.lr=") &&
              strstr(r.err, "gradient_clipping="),
          "one note lists the keys resolved from auto: %s", r.err);

    const char *g = write_file("auto_total.json", "{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": "
                                                  "{\"total_num_steps\": \"auto\", \"warmup_num_steps\": 10}}}");
    const char *gf[1] = {g};
    const char *sets[1] = {"run.steps=321"};
    load(&cfg, gf, 1, sets, 1, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_COSINE_LR && cfg.sched.total_num_steps == 321,
          "total_num_steps auto = run.steps: %ld", cfg.sched.total_num_steps);
    config_free(&cfg);
    json_decref(d);
    printf("\"auto\": default's value, warmup_max_lr = lr, total_num_steps = run.steps, the note\n");
}

/* ---------------------------------------------------------------- optimizer / scheduler */

static void test_optim_sched(void)
{
    json_t *d = default_tree();
    config_t cfg;
    /* DeepSpeed's documented defaults (lr_schedules.py) are the spec here. */
    const char *wl = write_file("warmuplr.json", "{\"scheduler\": {\"type\": \"WarmupLR\"}}");
    const char *f1[1] = {wl};
    load(&cfg, f1, 1, NULL, 0, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_LR && cfg.sched.warmup_min_lr == 0.0 &&
              cfg.sched.warmup_max_lr == cfg.optim.lr && cfg.sched.warmup_num_steps == 1000 &&
              cfg.sched.warmup_type == WARMUP_LOG,
          "WarmupLR defaults: min 0, max = optimizer lr, 1000 steps, log (%g %g %ld %d)", cfg.sched.warmup_min_lr,
          cfg.sched.warmup_max_lr, cfg.sched.warmup_num_steps, (int)cfg.sched.warmup_type);
    config_free(&cfg);

    const char *cos = write_file("cos.json", "{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {}}}");
    const char *f2[1] = {cos};
    const char *steps[1] = {"run.steps=5000"};
    load(&cfg, f2, 1, steps, 1, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_COSINE_LR && cfg.sched.total_num_steps == 5000 &&
              cfg.sched.warmup_num_steps == 1000 && cfg.sched.warmup_min_ratio == 0.0 &&
              cfg.sched.cos_min_ratio == 1e-4 && cfg.sched.warmup_type == WARMUP_LOG,
          "WarmupCosineLR defaults; missing total_num_steps = run.steps (%ld)", cfg.sched.total_num_steps);
    config_free(&cfg);

    /* a block without a type tunes the default's schedule, which follows
     * run.steps and the optimizer's lr */
    const char *s3[3] = {"scheduler.params.warmup_num_steps=3", "run.steps=1000", "optimizer.params.lr=2e-3"};
    load(&cfg, NULL, 0, s3, 3, 1);
    EXPECT(cfg.sched.total_num_steps == 1000 && cfg.sched.warmup_max_lr == 2e-3 && cfg.sched.warmup_num_steps == 3 &&
              cfg.sched.warmup_type == WARMUP_LINEAR,
          "the default's WarmupDecayLR follows run.steps and lr unless given (%ld, %g)", cfg.sched.total_num_steps,
          cfg.sched.warmup_max_lr);
    config_free(&cfg);

    /* A DeepSpeed block of the default's own type replaces it whole: what it
     * leaves out is DeepSpeed's default, never fabula's (warmup_type "log",
     * warmup_max_lr 0.001), and the lr follows DeepSpeed's log warm-up. */
    const char *decay = write_file("decay.json", "{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": "
                                                 "{\"warmup_num_steps\": 10, \"total_num_steps\": 100}}}");
    const char *f3[1] = {decay};
    const char *s3b[1] = {"optimizer.params.lr=2e-3"};
    load(&cfg, f3, 1, s3b, 1, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_DECAY_LR && cfg.sched.warmup_type == WARMUP_LOG &&
              cfg.sched.warmup_max_lr == 1e-3 && cfg.sched.warmup_min_lr == 0.0 && cfg.sched.total_num_steps == 100,
          "a user's WarmupDecayLR takes DeepSpeed's defaults, not the default block's (type %d, max %g)",
          (int)cfg.sched.warmup_type, cfg.sched.warmup_max_lr);
    for (long it = 0; it < 10; it++) {
        double want = 1e-3 * log((double)it + 1.0) / log(10.0);
        double got = schedule_lr_at_iteration(&cfg.sched, &cfg.optim, it);
        EXPECT(fabs(got - want) <= 1e-12 * fmax(want, 1e-300), "WarmupDecayLR log warm-up at iteration %ld: %.10g, "
              "DeepSpeed %.10g", it, got, want);
    }
    config_free(&cfg);

    /* The same for the optimizer: Adam with only lr gets DeepSpeed's (torch's)
     * betas, eps and weight decay, not the default block's 0.95 and 0.1. */
    const char *adam_lr = write_file("adam_lr.json", "{\"optimizer\": {\"type\": \"AdamW\", \"params\": "
                                                     "{\"lr\": 1e-4}}}");
    const char *f3c[1] = {adam_lr};
    load(&cfg, f3c, 1, NULL, 0, 1);
    EXPECT(cfg.optim.lr == 1e-4 && cfg.optim.beta1 == 0.9 && cfg.optim.beta2 == 0.999 && cfg.optim.eps == 1e-8 &&
              cfg.optim.weight_decay == 0.0,
          "a user's AdamW takes DeepSpeed's defaults (betas %g %g, eps %g, weight_decay %g)", cfg.optim.beta1,
          cfg.optim.beta2, cfg.optim.eps, cfg.optim.weight_decay);
    config_free(&cfg);

    load(&cfg, NULL, 0, NULL, 0, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_DECAY_LR && cfg.sched.total_num_steps == (long)dnum(d, "run.steps") &&
              near(cfg.sched.warmup_max_lr, dnum(d, "scheduler.params.warmup_max_lr")) &&
              cfg.sched.warmup_type == WARMUP_LINEAR,
          "the default run's schedule");
    EXPECT(cfg.optim.adam_w_mode == 1 && cfg.optim.lr == dnum(d, "optimizer.params.lr") &&
              cfg.optim.beta2 == json_number_value(json_array_get(tree_get(d, "optimizer.params.betas"), 1)),
          "the default optimizer is AdamW");
    config_free(&cfg);

    const char *adam = write_file("adam.json", "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1e-4}}}");
    const char *f4[1] = {adam};
    load(&cfg, f4, 1, NULL, 0, 1);
    EXPECT(cfg.optim.adam_w_mode == 1, "Adam: DeepSpeed's adam_w_mode default true");
    EXPECT(cfg.sched.type == SCHED_CONSTANT, "a file with an optimizer and no scheduler: constant lr");
    json_t *eff = json_loads(cfg.effective_json, 0, NULL);
    EXPECT(eff && !json_object_get(eff, "scheduler"), "no scheduler in the effective config");
    json_decref(eff);
    config_free(&cfg);
    const char *s5[1] = {"optimizer.params.adam_w_mode=false"};
    load(&cfg, f4, 1, s5, 1, 1);
    EXPECT(cfg.optim.adam_w_mode == 0, "Adam with adam_w_mode false: Adam + L2");
    config_free(&cfg);
    const char *s6[1] = {"optimizer.params.lr=1e-3"};
    load(&cfg, NULL, 0, s6, 1, 1);
    EXPECT(cfg.sched.type == SCHED_WARMUP_DECAY_LR, "--set on the optimizer keeps the default schedule");
    config_free(&cfg);
    const char *s7[1] = {"scheduler=null"};
    load(&cfg, NULL, 0, s7, 1, 1);
    EXPECT(cfg.sched.type == SCHED_CONSTANT, "scheduler null: constant lr");
    config_free(&cfg);

    /* fp16 and ZeRO: DeepSpeed's defaults. */
    const char *s8[2] = {"fp16.enabled=true", "zero_optimization.stage=3"};
    load(&cfg, NULL, 0, s8, 2, 1);
    EXPECT(cfg.fp16.enabled && cfg.fp16.loss_scale == 0 && cfg.fp16.initial_scale_power == 16 &&
              cfg.fp16.loss_scale_window == 1000 && cfg.fp16.hysteresis == 2 && cfg.fp16.min_loss_scale == 1,
          "fp16 loss-scaler defaults");
    EXPECT(cfg.zero.stage == 3 && cfg.zero.overlap_comm == 1 && cfg.zero.reduce_bucket_size == 5e8 &&
              cfg.zero.allgather_bucket_size == 5e8 && cfg.zero.offload_optimizer == 0 && cfg.zero.offload_param == 0,
          "ZeRO defaults (overlap_comm true at stage 3)");
    config_free(&cfg);
    const char *legacy = write_file("legacy.json", "{\"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true}}");
    const char *f9[1] = {legacy};
    load(&cfg, f9, 1, NULL, 0, 1);
    EXPECT(cfg.zero.offload_optimizer == 1 && cfg.zero.overlap_comm == 0, "legacy cpu_offload true = offload_optimizer cpu");
    config_free(&cfg);
    json_decref(d);
    printf("optimizer (Adam/AdamW modes), schedulers (DeepSpeed defaults, linking, constant), fp16 and ZeRO defaults\n");
}

/* ---------------------------------------------------------------- validation */

static void test_validation(void)
{
    static const struct {
        const char *set, *key;
    } bad[] = {
        {"model.hidden_size=0", "model.hidden_size"},
        {"model.vocab_size=-3", "model.vocab_size"},
        {"model.intermediate_size=0", "model.intermediate_size"},
        {"model.num_hidden_layers=0", "model.num_hidden_layers"},
        {"model.hidden_size=130", "model.hidden_size"},          /* 4 heads do not divide 130 */
        {"model.num_key_value_heads=3", "model.num_key_value_heads"},
        {"model.hidden_size=12", "model.hidden_size"},           /* head_dim 3: odd */
        {"model.num_experts_per_tok=5", "model.num_experts_per_tok"},
        {"model.num_experts_per_tok=0", "model.num_experts_per_tok"},
        {"model.vocab_size=268", "model.vocab_size"},
        {"model.capacity_factor=-0.5", "model.capacity_factor"},
        {"model.expert_dropout=1", "model.expert_dropout"},
        {"model.router_aux_loss_coef=-1", "model.router_aux_loss_coef"},
        {"model.router_z_loss_coef=-1e-3", "model.router_z_loss_coef"},
        {"model.rope_theta=0", "model.rope_theta"},
        {"model.rms_norm_eps=-1e-5", "model.rms_norm_eps"},
        {"model.hidden_size=\"big\"", "model.hidden_size"},
        {"model.tie_word_embeddings=\"yes\"", "model.tie_word_embeddings"},
        {"model=5", "model"},
        {"optimizer.params.lr=0", "optimizer.params.lr"},
        {"optimizer.params.betas=[0.9, 1.0]", "optimizer.params.betas"},
        {"optimizer.params.betas=[0.9]", "optimizer.params.betas"},
        {"optimizer.params.eps=0", "optimizer.params.eps"},
        {"optimizer.params.weight_decay=-0.1", "optimizer.params.weight_decay"},
        {"optimizer.type=SGD", "optimizer.type"},
        {"scheduler.type=OneCycle", "scheduler.type"},
        {"scheduler.params.warmup_max_lr=0", "scheduler.params.warmup_max_lr"},
        {"scheduler.params.warmup_type=cosine", "scheduler.params.warmup_type"},
        {"data.seq_len=1", "data.seq_len"},
        {"data.overlap=128", "data.overlap"},
        {"data.overlap=-1", "data.overlap"},
        {"data.min_seq_len=1", "data.min_seq_len"},
        {"data.min_seq_len=129", "data.min_seq_len"},
        {"run.steps=0", "run.steps"},
        {"gradient_clipping=-1", "gradient_clipping"},
        {"steps_per_print=0", "steps_per_print"},
        {"train_micro_batch_size_per_gpu=0", "train_micro_batch_size_per_gpu"},
        {"train_batch_size=2.5", "train_batch_size"},
        {"zero_optimization.stage=4", "zero_optimization.stage"},
        {"zero_optimization.offload_optimizer.device=nvme", "zero_optimization.offload_optimizer.device"},
        {"zero_optimization.offload_param.device=cpu", "zero_optimization.offload_param.device"},
        {"zero_optimization.reduce_bucket_size=0", "zero_optimization.reduce_bucket_size"},
        {"zero_optimization.allgather_bucket_size=-1", "zero_optimization.allgather_bucket_size"},
        {"fp16.hysteresis=0", "fp16.hysteresis"},
        {"amp.enabled=true", "amp.enabled"},
        {"wall_clock_breakdown=3", "wall_clock_breakdown"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_set_error(bad[i].set, bad[i].key, NULL);

    const char *two[2] = {"fp16.enabled=true", "bf16.enabled=true"};
    expect_error("fp16 and bf16", NULL, 0, two, 2, "fp16.enabled", "bf16.enabled");
    const char *inc[3] = {"train_batch_size=10", "train_micro_batch_size_per_gpu=4", "gradient_accumulation_steps=2"};
    expect_error("inconsistent batch", NULL, 0, inc, 3, "train_batch_size", "inconsistent");
    const char *both = write_file("both.json", "{\"zero_optimization\": {\"cpu_offload\": true, "
                                               "\"offload_optimizer\": {\"device\": \"cpu\"}}}");
    const char *fb[1] = {both};
    expect_error("cpu_offload with offload_optimizer", fb, 1, NULL, 0, "cpu_offload", "offload_optimizer");

    const char *missing[1] = {DIR "/does_not_exist.json"};
    expect_error("missing file", missing, 1, NULL, 0, "does_not_exist.json", strerror(ENOENT));
    const char *bad_json = write_file("bad.json", "{\n  \"model\": {\n    \"hidden_size\": 12,,\n  }\n}\n");
    const char *fbj[1] = {bad_json};
    expect_error("malformed JSON", fbj, 1, NULL, 0, "bad.json:3:", NULL);
    /* a key given twice: refused, as DeepSpeed refuses it, naming the key
     * and both lines; each duplicate is reported */
    const char *dup = write_file("dup.json", "{\"steps_per_print\": 1,\n \"fp16\": {\"loss_scale_window\": 5,"
                                             " \"loss_scale_window\": 6},\n \"steps_per_print\": 2}");
    const char *fd[1] = {dup};
    result_t dr;
    run_child(&dr, fd, 1, NULL, 0, 1);
    EXPECT(dr.status == 2 &&
               strstr(dr.err, DIR "/dup.json:2: duplicate key 'fp16.loss_scale_window', given first on line 2") &&
               strstr(dr.err, DIR "/dup.json:3: duplicate key 'steps_per_print', given first on line 1"),
           "duplicate keys: exit 2, each named with both lines: %d %s", dr.status, dr.err);
    const char *arr = write_file("array.json", "[1, 2]");
    const char *fa[1] = {arr};
    expect_error("top-level array", fa, 1, NULL, 0, "array.json", "object");
    if (geteuid() != 0) {
        const char *locked = write_file("locked.json", "{}");
        if (chmod(locked, 0) == 0) {
            const char *fl[1] = {locked};
            expect_error("unreadable file", fl, 1, NULL, 0, "locked.json", strerror(EACCES));
        }
    }
    printf("validation: %zu bad values plus file, JSON, batch, precision and offload errors exit 2 naming the key\n",
           sizeof bad / sizeof *bad);
}

/* ---------------------------------------------------------------- unknown keys, effective config */

static void test_unknown_and_effective(void)
{
    const char *f = write_file("unknown.json", "{\"model\": {\"hiden_size\": 3}, \"frobnicate\": {\"a\": 1},"
                                               " \"zero_optimization\": {\"stage\": 1, \"no_such\": true},"
                                               " \"prescale_gradients\": false, \"flops_profiler\": {\"x\": 1}}");
    const char *files[1] = {f};
    result_t r;
    run_child(&r, files, 1, NULL, 0, 1);
    EXPECT(r.status == 0, "unknown keys do not stop the run: %d %s", r.status, r.err);
    EXPECT(strstr(r.err, "warning") && strstr(r.err, "'model.hiden_size'") && strstr(r.err, "'frobnicate'") &&
              strstr(r.err, "'zero_optimization.no_such'"),
          "one warning per unknown key with its full path: %s", r.err);
    EXPECT(!strstr(r.err, "frobnicate.a") && !strstr(r.err, "'flops_profiler") && !strstr(r.err, "warning: unknown config key 'presc"),
          "no warning inside an unknown block nor for inert keys: %s", r.err);
    EXPECT(strstr(r.err, "note") && strstr(r.err, "prescale_gradients") && strstr(r.err, "flops_profiler"),
          "inert keys are listed in a note: %s", r.err);

    /* DeepSpeed's ZeRO buffer keys fabula does not use: each named in the
     * note, none in a warning, a wrong type still refused */
    static const char *const zkeys[] = {"contiguous_gradients", "reduce_scatter", "allgather_partitions",
                                        "round_robin_gradients", "stage3_param_persistence_threshold",
                                        "stage3_max_live_parameters", "stage3_max_reuse_distance",
                                        "stage3_prefetch_bucket_size", "stage3_gather_16bit_weights_on_model_save",
                                        "gather_16bit_weights_on_model_save", "max_live_parameters"};
    const char *z = write_file("zero_inert.json",
                               "{\"zero_optimization\": {\"stage\": 3, \"contiguous_gradients\": true,"
                               " \"reduce_scatter\": true, \"allgather_partitions\": true, \"round_robin_gradients\": false,"
                               " \"stage3_param_persistence_threshold\": 1e6, \"stage3_max_live_parameters\": 1e9,"
                               " \"stage3_max_reuse_distance\": 1e9, \"stage3_prefetch_bucket_size\": 5e7,"
                               " \"stage3_gather_16bit_weights_on_model_save\": true,"
                               " \"gather_16bit_weights_on_model_save\": true, \"max_live_parameters\": 5}}");
    const char *zf[1] = {z};
    run_child(&r, zf, 1, NULL, 0, 1);
    const char *note = strstr(r.err, "accepted without effect");
    EXPECT(r.status == 0 && note && !strstr(r.err, "warning"), "ZeRO buffer keys: accepted, a note, no warning: %s",
          r.err);
    for (size_t i = 0; note && i < sizeof zkeys / sizeof *zkeys; i++) {
        char want[128];
        snprintf(want, sizeof want, "zero_optimization.%s", zkeys[i]);
        EXPECT(strstr(note, want) != NULL, "the no-effect note names %s: %s", want, note);
    }
    const char *zbad = write_file("zero_inert_bad.json", "{\"zero_optimization\": {\"contiguous_gradients\": 3}}");
    const char *zb[1] = {zbad};
    run_child(&r, zb, 1, NULL, 0, 1);
    EXPECT(r.status == 2 && strstr(r.err, "zero_optimization.contiguous_gradients"),
          "a no-effect key of the wrong type is still refused, named: %d %s", r.status, r.err);

    /* The effective config, loaded again, gives the same config. */
    const char *g = write_file("eff_in.json", "{\"train_batch_size\": 32, \"gradient_accumulation_steps\": 2,"
                                              " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 2e-4}},"
                                              " \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": "
                                              "{\"total_num_steps\": 50, \"warmup_num_steps\": 5}},"
                                              " \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true},"
                                              " \"fp16\": {\"enabled\": \"auto\"}}");
    const char *gf[1] = {g};
    config_t a, b;
    load(&a, gf, 1, NULL, 0, 2);
    const char *again = write_file("eff_out.json", a.effective_json);
    const char *af[1] = {again};
    load(&b, af, 1, NULL, 0, 2);
    EXPECT(strcmp(a.effective_json, b.effective_json) == 0, "the effective config is a fixed point:\n%s\n---\n%s",
          a.effective_json, b.effective_json);
    EXPECT(a.train_batch_size == b.train_batch_size && a.micro_batch == b.micro_batch && a.grad_accum == b.grad_accum &&
              a.optim.lr == b.optim.lr && a.sched.type == b.sched.type &&
              a.sched.total_num_steps == b.sched.total_num_steps && a.zero.offload_optimizer == b.zero.offload_optimizer &&
              a.zero.stage == b.zero.stage && a.optim.adam_w_mode == b.optim.adam_w_mode,
          "reloading the effective config gives the same values");
    EXPECT(a.micro_batch * a.grad_accum * 2 == a.train_batch_size && a.grad_accum == 2,
          "batch inferred for world 2: (%d,%d,%d)", a.train_batch_size, a.micro_batch, a.grad_accum);
    json_t *eff = json_loads(a.effective_json, 0, NULL);
    EXPECT(eff && !tree_get(eff, "zero_optimization.cpu_offload") &&
              strcmp(json_string_value(tree_get(eff, "zero_optimization.offload_optimizer.device")),
                     "cpu") == 0,
          "legacy cpu_offload is rewritten as offload_optimizer in the effective config");
    json_decref(eff);
    config_free(&a);
    config_free(&b);
    printf("unknown-key warnings, inert-key note, effective config reloads to itself\n");
}

/* ---------------------------------------------------------------- all errors at once, --strict, suggestions */

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_all_errors_and_strict(void)
{
    /* five independent problems in one file: every one is named in one run */
    const char *f = write_file("many.json", "{\"model\": {\"hidden_size\": 0, \"num_attention_heads\": \"x\"},"
                                            " \"optimizer\": {\"params\": {\"lr\": -1}},"
                                            " \"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\"}},"
                                            " \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true},"
                                            " \"run\": {\"steps\": 0}}");
    const char *files[1] = {f};
    result_t r;
    run_child(&r, files, 1, NULL, 0, 1);
    static const char *const named[] = {"model.hidden_size", "model.num_attention_heads", "optimizer.params.lr",
                                        "zero_optimization.offload_optimizer.device", "bf16.enabled",
                                        "run.steps"};
    EXPECT(r.status == 2, "several bad keys: exit 2, got %d: %s", r.status, r.err);
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        EXPECT(strstr(r.err, named[i]) != NULL, "all errors reported at once: '%s' missing from %s", named[i], r.err);
    EXPECT(strstr(r.err, "the config has 6 errors") && count(r.err, "fabula: error: ") == 7,
           "one line per error and a count: %s", r.err);

    /* typos: a warning that names the nearest known key; --strict makes
     * each an error, reported together */
    static const char *const typos[][2] = {
        {"zero_optimisation", "zero_optimization"}, {"gradient_cliping", "gradient_clipping"},
        {"zero_optimization.stgae", "zero_optimization.stage"}, {"fp16.enable", "fp16.enabled"},
        {"optimizer.params.weight_decy", "optimizer.params.weight_decay"}};
    const char *t = write_file("typos.json", "{\"zero_optimisation\": {\"stage\": 2}, \"gradient_cliping\": 1.0,"
                                             " \"zero_optimization\": {\"stgae\": 2}, \"fp16\": {\"enable\": true},"
                                             " \"optimizer\": {\"params\": {\"weight_decy\": 1}}, \"frobnicate\": 1}");
    const char *tf[1] = {t};
    run_child(&r, tf, 1, NULL, 0, 1);
    EXPECT(r.status == 0, "typos only warn: %d %s", r.status, r.err);
    for (size_t i = 0; i < sizeof typos / sizeof *typos; i++) {
        char want[256];
        snprintf(want, sizeof want, "warning: unknown config key '%s' (ignored; did you mean '%s'?)", typos[i][0],
                 typos[i][1]);
        EXPECT(strstr(r.err, want) != NULL, "'%s' suggests '%s': %s", typos[i][0], typos[i][1], r.err);
    }
    EXPECT(strstr(r.err, "unknown config key 'frobnicate' (ignored)"), "no suggestion when nothing is close: %s",
           r.err);
    const char *strict[1] = {"run.strict_config=true"};
    run_child(&r, tf, 1, strict, 1, 1);
    EXPECT(r.status == 2, "run.strict_config: unknown keys exit 2, got %d", r.status);
    for (size_t i = 0; i < sizeof typos / sizeof *typos; i++) {
        char want[256];
        snprintf(want, sizeof want, "error: unknown config key '%s'; did you mean '%s'?", typos[i][0], typos[i][1]);
        EXPECT(strstr(r.err, want) != NULL, "strict error for '%s' with the suggestion: %s", typos[i][0], r.err);
    }
    EXPECT(strstr(r.err, "error: unknown config key 'frobnicate'") && strstr(r.err, "the config has 6 errors"),
           "strict: every unknown key at once: %s", r.err);
    const char *clean[2] = {"run.strict_config=true", "gradient_clipping=0.5"};
    run_child(&r, NULL, 0, clean, 2, 1);
    EXPECT(r.status == 0 && !strstr(r.err, "warning"), "strict with only known keys runs: %d %s", r.status, r.err);

    /* a 1 MB value is not echoed: cut to 80 characters with "..." */
    size_t big = 1 << 20;
    char *text = malloc(big + 64);
    if (!text)
        exit(99);
    strcpy(text, "{\"model\": {\"hidden_size\": \"");
    size_t at = strlen(text);
    memset(text + at, 'x', big);
    strcpy(text + at + big, "\"}}");
    const char *bf[1] = {write_file("big.json", text)};
    free(text);
    run_child(&r, bf, 1, NULL, 0, 1);
    char eighty[82];
    memset(eighty, 'x', 81);
    eighty[81] = '\0';
    EXPECT(r.status == 2 && strstr(r.err, "model.hidden_size") && strstr(r.err, "xxx...") && !strstr(r.err, eighty) &&
               strlen(r.err) < 400,
           "a huge value is cut in the message: %d, %zu bytes", r.status, strlen(r.err));
    printf("every config error in one run, --strict, did-you-mean suggestions, long values cut\n");
}

int main(void)
{
    if (mkdir(DIR, 0755) != 0 && errno != EEXIST) {
        printf("cannot create %s: %s\n", DIR, strerror(errno));
        return 99;
    }
    test_batch_rule();
    test_sets_and_merge();
    test_auto();
    test_optim_sched();
    test_validation();
    test_unknown_and_effective();
    test_all_errors_and_strict();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
