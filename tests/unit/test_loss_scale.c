/* The fp16 loss scaler (src/zero/loss_scale.h).
 *
 *   test_loss_scale [TRAJECTORY_FILE...]
 *
 * With files: replays each case of each file (written by
 * validation/loss_scale_ref.py, an independent transcription of DeepSpeed's
 * DynamicLossScaler; tests/e2e/loss_scale.sh runs both) through the scaler
 * and compares, after every step, the skip flag, the factor and the state
 * (cur_scale, cur_iter, last_overflow_iter, cur_hysteresis) exactly; floats
 * travel as C99 hex literals. Every difference prints a MISMATCH line.
 *
 * Always: properties that need no reference values (fp16 off is the
 * identity, a static scale never moves, the floor holds, a checkpointed
 * state restored into a fresh scaler continues the same trajectory, invalid
 * states are refused).
 *
 * Exit 0 when everything matches, 1 otherwise, 2 for an unreadable file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "zero/loss_scale.h"

/* ---- properties ----------------------------------------------------------- */

static fp16_config_t fp16_cfg(int enabled, double loss_scale, int power, int window, int hysteresis, double min_scale)
{
    fp16_config_t c = {.enabled = enabled, .loss_scale = loss_scale, .initial_scale_power = power,
                       .loss_scale_window = window, .hysteresis = hysteresis, .min_loss_scale = min_scale};
    return c;
}

/* Deterministic overflow flags with probability about 1/period. */
static int lcg_flag(unsigned long long *x, unsigned period)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(*x >> 33) % period == 0;
}

/* Field by field: the structs have padding, which memcmp would compare. */
static int same_state(const loss_scale_state_t *a, const loss_scale_state_t *b)
{
    return a->cur_scale == b->cur_scale && a->cur_iter == b->cur_iter &&
           a->last_overflow_iter == b->last_overflow_iter && a->cur_hysteresis == b->cur_hysteresis;
}

static int same_scaler(const loss_scale_t *a, const loss_scale_t *b)
{
    return a->enabled == b->enabled && a->dynamic == b->dynamic && a->min_scale == b->min_scale &&
           a->scale_window == b->scale_window && a->hysteresis == b->hysteresis &&
           a->consecutive_hysteresis == b->consecutive_hysteresis && same_state(&a->st, &b->st);
}

static void test_disabled(void)
{
    fp16_config_t c = fp16_cfg(0, 0.0, 16, 4, 2, 1.0);
    loss_scale_t s;
    loss_scale_init(&s, &c);
    for (int i = 0; i < 20; i++) {
        EXPECT(loss_scale_value(&s) == 1.0, "fp16 off: factor %g at step %d", loss_scale_value(&s), i);
        int skip = loss_scale_update(&s, i % 3 == 0);
        EXPECT(skip == 0, "fp16 off: step %d skipped", i);
    }
    EXPECT(s.st.cur_iter == 20, "fp16 off: cur_iter %ld after 20 updates", s.st.cur_iter);
}

static void test_static(void)
{
    fp16_config_t c = fp16_cfg(1, 384.0, 16, 2, 3, 1.0);
    loss_scale_t s;
    loss_scale_init(&s, &c);
    for (int i = 0; i < 40; i++) {
        int overflow = i % 5 == 1 || i % 7 == 0;
        EXPECT(loss_scale_value(&s) == c.loss_scale, "static: factor %g at step %d", loss_scale_value(&s), i);
        int skip = loss_scale_update(&s, overflow);
        EXPECT(skip == overflow, "static: step %d overflow %d skip %d", i, overflow, skip);
    }
}

static void test_initial(void)
{
    for (int power = 0; power <= 64; power += 16) {
        fp16_config_t c = fp16_cfg(1, 0.0, power, 1000, 2, 1.0);
        loss_scale_t s;
        loss_scale_init(&s, &c);
        EXPECT(loss_scale_value(&s) == ldexp(1.0, power), "dynamic: initial factor %g for power %d",
               loss_scale_value(&s), power);
        EXPECT(s.st.cur_iter == 0 && s.st.last_overflow_iter == -1 && s.st.cur_hysteresis == c.hysteresis,
               "dynamic: initial state %ld %ld %d", s.st.cur_iter, s.st.last_overflow_iter, s.st.cur_hysteresis);
        EXPECT(s.consecutive_hysteresis == 0, "consecutive_hysteresis defaults to DeepSpeed's false");
    }
}

/* Whatever the overflows: every overflow skips, the scale never goes below
 * the floor, only moves by factors of 2 (or clamps to the floor), and stays
 * finite even when nothing ever overflows (window 1: a doubling per step). */
static void test_bounds(void)
{
    unsigned long long x = 12345;
    fp16_config_t c = fp16_cfg(1, 0.0, 8, 3, 2, 0.75);
    loss_scale_t s;
    loss_scale_init(&s, &c);
    for (int i = 0; i < 5000; i++) {
        double before = loss_scale_value(&s);
        int overflow = lcg_flag(&x, i < 2500 ? 2 : 9);
        int skip = loss_scale_update(&s, overflow);
        double after = loss_scale_value(&s);
        EXPECT(skip == overflow, "dynamic: step %d overflow %d skip %d", i, overflow, skip);
        EXPECT(after >= c.min_loss_scale, "dynamic: scale %g below the floor at step %d", after, i);
        EXPECT(after == before || after == 2 * before || after == before / 2 || after == c.min_loss_scale,
               "dynamic: step %d moved the scale from %g to %g", i, before, after);
        EXPECT(overflow ? after <= before : after >= before, "dynamic: step %d (overflow %d) moved %g -> %g", i,
               overflow, before, after);
    }
    c = fp16_cfg(1, 0.0, 64, 1, 1, 1.0);
    loss_scale_init(&s, &c);
    for (int i = 0; i < 1100; i++)
        loss_scale_update(&s, 0);
    EXPECT(isfinite(loss_scale_value(&s)) && loss_scale_value(&s) >= ldexp(1.0, 1023),
           "dynamic: 1100 clean steps at window 1 end at %g (want the largest finite power of 2)",
           loss_scale_value(&s));
}

/* Checkpoint at several points of a run; a fresh scaler restored from the
 * saved state must follow the original step for step. */
static void test_restore_continues(int consecutive)
{
    fp16_config_t c = fp16_cfg(1, 0.0, 12, 5, 3, 2.0);
    for (int cut = 0; cut <= 300; cut += 37) {
        loss_scale_t a, b;
        loss_scale_init(&a, &c);
        a.consecutive_hysteresis = consecutive;
        unsigned long long x = 99 + (unsigned long long)cut;
        for (int i = 0; i < cut; i++)
            loss_scale_update(&a, lcg_flag(&x, 4));
        loss_scale_state_t saved = a.st;
        loss_scale_init(&b, &c);
        b.consecutive_hysteresis = consecutive;
        char why[256];
        EXPECT(loss_scale_restore(&b, &saved, why, sizeof why) == 0, "restore at %d refused: %s", cut, why);
        for (int i = 0; i < 200; i++) {
            int overflow = lcg_flag(&x, 4);
            int ka = loss_scale_update(&a, overflow), kb = loss_scale_update(&b, overflow);
            EXPECT(ka == kb && same_state(&a.st, &b.st),
                   "restored scaler (cut %d, consecutive %d) diverges %d steps later: scale %g vs %g", cut,
                   consecutive, i, a.st.cur_scale, b.st.cur_scale);
        }
    }
}

static void test_restore_checks(void)
{
    fp16_config_t c = fp16_cfg(1, 0.0, 10, 4, 2, 1.0);
    loss_scale_t s;
    loss_scale_init(&s, &c);
    loss_scale_t fresh = s;
    const loss_scale_state_t bad[] = {
        {0.0, 5, 2, 1},  {-4.0, 5, 2, 1}, {INFINITY, 5, 2, 1}, {NAN, 5, 2, 1}, {8.0, -1, -1, 1},
        {8.0, 5, 5, 1},  {8.0, 5, 9, 1},  {8.0, 5, -2, 1},     {8.0, 5, 2, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char why[256] = "";
        int rc = loss_scale_restore(&s, &bad[i], why, sizeof why);
        EXPECT(rc == -1 && why[0] != '\0', "invalid state %zu accepted", i);
        EXPECT(same_scaler(&s, &fresh), "refused state %zu changed the scaler", i);
    }
    /* Saved with hysteresis 5, resumed with 2: the count is capped. */
    loss_scale_state_t wide = {64.0, 30, 20, 5};
    char why[256];
    EXPECT(loss_scale_restore(&s, &wide, why, sizeof why) == 0, "valid state refused: %s", why);
    EXPECT(s.st.cur_hysteresis == c.hysteresis, "cur_hysteresis %d not capped at %d", s.st.cur_hysteresis,
           c.hysteresis);
    EXPECT(s.st.cur_scale == wide.cur_scale && s.st.cur_iter == wide.cur_iter &&
               s.st.last_overflow_iter == wide.last_overflow_iter,
           "dynamic restore did not take the state");
    /* A static scaler keeps its configured factor. */
    fp16_config_t cs = fp16_cfg(1, 1024.0, 10, 4, 2, 1.0);
    loss_scale_init(&s, &cs);
    EXPECT(loss_scale_restore(&s, &wide, why, sizeof why) == 0, "valid state refused: %s", why);
    EXPECT(loss_scale_value(&s) == cs.loss_scale && s.st.cur_iter == wide.cur_iter,
           "static restore: factor %g cur_iter %ld", loss_scale_value(&s), s.st.cur_iter);
}

/* ---- reference trajectories ------------------------------------------------ */

static int mismatches;

static void mismatch(const char *file, const char *name, long step, const char *what, const char *got, const char *want)
{
    mismatches++;
    failures++;
    printf("MISMATCH %s case %s step %ld %s: fabula %s, reference %s\n", file, name, step, what, got, want);
}

static void compare_f(const char *file, const char *name, long step, const char *what, double got, double want)
{
    checks++;
    if (got != want) {
        char g[64], w[64];
        snprintf(g, sizeof g, "%a", got);
        snprintf(w, sizeof w, "%a", want);
        mismatch(file, name, step, what, g, w);
    }
}

/* `want` is a decimal integer or "-" (the reference has no such field). */
static void compare_l(const char *file, const char *name, long step, const char *what, long got, const char *want)
{
    if (strcmp(want, "-") == 0)
        return;
    checks++;
    char *end;
    long w = strtol(want, &end, 10);
    char g[32];
    snprintf(g, sizeof g, "%ld", got);
    if (*end != '\0' || w != got)
        mismatch(file, name, step, what, g, want);
}

static double parse_hex(const char *text, int *ok)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        *ok = 0;
    return v;
}

/* Replays every case of `path`; returns -1 when the file cannot be read or
 * parsed (a broken reference must not pass as an empty one). */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    char line[1024], name[256] = "", t_ls[64], t_min[64];
    int in_case = 0, ncases = 0;
    long nsteps = 0, lineno = 0;
    loss_scale_t s;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char kw[16];
        if (sscanf(line, "%15s", kw) != 1)
            continue;
        if (strcmp(kw, "case") == 0) {
            if (in_case || sscanf(line, "case %255s", name) != 1)
                goto bad;
            in_case = 1;
            nsteps = 0;
            memset(&s, 0, sizeof s);
        } else if (strcmp(kw, "config") == 0) {
            fp16_config_t c;
            int consecutive, ok = 1;
            if (!in_case || sscanf(line,
                                   "config enabled %d loss_scale %63s initial_scale_power %d loss_scale_window %d "
                                   "hysteresis %d consecutive_hysteresis %d min_loss_scale %63s",
                                   &c.enabled, t_ls, &c.initial_scale_power, &c.loss_scale_window, &c.hysteresis,
                                   &consecutive, t_min) != 7)
                goto bad;
            c.loss_scale = parse_hex(t_ls, &ok);
            c.min_loss_scale = parse_hex(t_min, &ok);
            if (!ok)
                goto bad;
            loss_scale_init(&s, &c);
            s.consecutive_hysteresis = consecutive;
        } else if (strcmp(kw, "step") == 0) {
            long i, cur_iter;
            int overflow, skip;
            char t_scale[64], t_last[32], t_hyst[32];
            int ok = 1;
            if (!in_case || sscanf(line, "step %ld %d %d %63s %ld %31s %31s", &i, &overflow, &skip, t_scale, &cur_iter,
                                   t_last, t_hyst) != 7 || i != nsteps)
                goto bad;
            double want_scale = parse_hex(t_scale, &ok);
            if (!ok)
                goto bad;
            int got_skip = loss_scale_update(&s, overflow);
            checks++;
            if (got_skip != skip) {
                char g[8], w[8];
                snprintf(g, sizeof g, "%d", got_skip);
                snprintf(w, sizeof w, "%d", skip);
                mismatch(path, name, i, "skip", g, w);
            }
            compare_f(path, name, i, "factor", loss_scale_value(&s), want_scale);
            compare_f(path, name, i, "cur_scale", s.st.cur_scale, want_scale);
            char t_iter[32];
            snprintf(t_iter, sizeof t_iter, "%ld", cur_iter);
            compare_l(path, name, i, "cur_iter", s.st.cur_iter, t_iter);
            compare_l(path, name, i, "last_overflow_iter", s.st.last_overflow_iter, t_last);
            compare_l(path, name, i, "cur_hysteresis", s.st.cur_hysteresis, t_hyst);
            nsteps++;
        } else if (strcmp(kw, "end") == 0) {
            long n;
            if (!in_case || sscanf(line, "end %ld", &n) != 1 || n != nsteps)
                goto bad;
            in_case = 0;
            ncases++;
        } else if (strcmp(kw, "raise") == 0) {
            /* DeepSpeed's raise_error_at_min_scale: fabula keeps skipping
             * instead, so such a reference cannot be replayed. */
            printf("MISMATCH %s case %s: the reference raised at min scale (line %ld)\n", path, name, lineno);
            mismatches++;
            failures++;
            in_case = 0;
            ncases++;
        } else {
            goto bad;
        }
    }
    if (ferror(f) || in_case || ncases == 0)
        goto bad;
    printf("%s: %d case(s) replayed\n", path, ncases);
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "%s:%ld: malformed or truncated reference trajectory\n", path, lineno);
    fclose(f);
    return -1;
}

int main(int argc, char **argv)
{
    test_disabled();
    test_static();
    test_initial();
    test_bounds();
    test_restore_continues(0);
    test_restore_continues(1);
    test_restore_checks();
    for (int i = 1; i < argc; i++)
        if (replay_file(argv[i]) != 0) {
            printf("%d checks, %d failures\n", checks, failures);
            return 2;
        }
    printf("%d checks, %d failures (%d trajectory mismatches)\n", checks, failures, mismatches);
    printf(failures ? "FAIL\n" : "PASS\n");
    return failures ? 1 : 0;
}
