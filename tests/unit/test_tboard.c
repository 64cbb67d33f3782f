/* src/tboard: CRC-32C against the test vectors of RFC 3720 (B.4) and the
 * usual check value, the protobuf encoding against the examples of the
 * protobuf encoding guide, the histogram buckets, the metrics-record walk,
 * the TFRecord framing of a written event file, and the CSV files with
 * their resume trim. (The whole format is read back by the real
 * TensorBoard in tests/e2e/tensorboard.sh.) */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "tboard/crc32c.h"
#include "tboard/pb.h"
#include "tboard/tb_csv.h"
#include "tboard/tb_events.h"
#include "tboard/tb_hist.h"
#include "tboard/tb_leaves.h"
#include "testlib.h"

static void test_crc32c(void)
{
    unsigned char buf[48];
    memset(buf, 0, 32);
    EXPECT(crc32c(buf, 32) == 0x8a9136aau, "32 zero bytes: %08x", crc32c(buf, 32));
    memset(buf, 0xff, 32);
    EXPECT(crc32c(buf, 32) == 0x62a8ab43u, "32 0xff bytes: %08x", crc32c(buf, 32));
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    EXPECT(crc32c(buf, 32) == 0x46dd794eu, "0..31: %08x", crc32c(buf, 32));
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    EXPECT(crc32c(buf, 32) == 0x113fdb5cu, "31..0: %08x", crc32c(buf, 32));
    /* RFC 3720 B.4: an iSCSI read command PDU */
    static const unsigned char pdu[48] = {0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
                                          0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
    EXPECT(crc32c(pdu, 48) == 0xd9963a56u, "iSCSI PDU: %08x", crc32c(pdu, 48));
    EXPECT(crc32c("123456789", 9) == 0xe3069283u, "check value: %08x", crc32c("123456789", 9));
    EXPECT(crc32c("", 0) == 0, "empty: %08x", crc32c("", 0));
    /* the mask of 0 is the constant alone; rotation moves bit 15 to bit 0 */
    EXPECT(crc32c_mask(0) == 0xa282ead8u, "mask(0) = %08x", crc32c_mask(0));
    EXPECT(crc32c_mask(1u << 15) == 0xa282ead9u, "mask(1<<15) = %08x", crc32c_mask(1u << 15));
}

static int bytes_are(const pb_buf_t *b, const unsigned char *want, size_t n)
{
    return b->len == n && memcmp(b->data, want, n) == 0;
}

static void test_pb(void)
{
    pb_buf_t b;
    pb_init(&b);
    static const struct {
        uint64_t v;
        unsigned char enc[10];
        size_t n;
    } varints[] = {
        {0, {0x00}, 1},
        {1, {0x01}, 1},
        {127, {0x7f}, 1},
        {128, {0x80, 0x01}, 2},
        {150, {0x96, 0x01}, 2},
        {300, {0xac, 0x02}, 2},
        {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
    };
    for (size_t i = 0; i < sizeof varints / sizeof *varints; i++) {
        pb_clear(&b);
        pb_varint(&b, varints[i].v);
        EXPECT(bytes_are(&b, varints[i].enc, varints[i].n), "varint %llu", (unsigned long long)varints[i].v);
        EXPECT(pb_varint_size(varints[i].v) == varints[i].n, "size of varint %llu",
               (unsigned long long)varints[i].v);
    }
    /* the encoding guide's Test1 {a: 150}, Test2 {b: "testing"}, Test3 {c: {a: 150}} */
    pb_clear(&b);
    pb_int64(&b, 1, 150);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x08, 0x96, 0x01}, 3), "a = 150");
    pb_clear(&b);
    pb_string(&b, 2, "testing");
    EXPECT(bytes_are(&b, (const unsigned char[]){0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}, 9),
           "b = \"testing\"");
    pb_clear(&b);
    size_t m = pb_begin(&b);
    pb_int64(&b, 1, 150);
    pb_end(&b, 3, m);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x1a, 0x03, 0x08, 0x96, 0x01}, 5), "c = {a: 150}");
    /* int64 -1: ten bytes, two's complement */
    pb_clear(&b);
    pb_int64(&b, 2, -1);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
                     11), "int64 -1");
    pb_clear(&b);
    pb_double(&b, 1, 1.0);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 9), "double 1.0");
    pb_clear(&b);
    pb_float(&b, 2, -2.0f);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x15, 0, 0, 0, 0xc0}, 5), "float -2.0");
    pb_clear(&b);
    pb_doubles(&b, 6, (const double[]){1.0, 2.0}, 2);
    EXPECT(bytes_are(&b, (const unsigned char[]){0x32, 0x10, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40},
                     18), "packed doubles [1, 2]");
    pb_clear(&b);
    pb_doubles(&b, 6, NULL, 0);
    EXPECT(b.len == 0, "an empty packed field is omitted");
    /* a nested message longer than 127 bytes: a 2-byte length */
    pb_clear(&b);
    m = pb_begin(&b);
    char s[201];
    memset(s, 'x', 200);
    s[200] = '\0';
    pb_string(&b, 1, s);
    pb_end(&b, 5, m);
    EXPECT(b.len == 3 + 203 && b.data[0] == 0x2a && b.data[1] == 0xcb && b.data[2] == 0x01 && b.data[3] == 0x0a &&
               b.data[4] == 0xc8 && b.data[5] == 0x01,
           "nested 203-byte message: %zu bytes, %02x %02x %02x", b.len, b.data[0], b.data[1], b.data[2]);
    pb_free(&b);
}

static void test_hist(void)
{
    size_t n;
    const double *lim = tb_hist_limits(&n);
    /* 774 steps of 10% from 1e-12 stay below 1e20, mirrored, 0, +-DBL_MAX */
    EXPECT(n == 2 * 774 + 3, "%zu limits", n);
    EXPECT(lim[0] == -DBL_MAX && lim[n - 1] == DBL_MAX && lim[774 + 1] == 0.0 && lim[776] == 1e-12,
           "edges: %g %g %g %g", lim[0], lim[n - 1], lim[775], lim[776]);
    int ascending = 1;
    for (size_t i = 1; i < n; i++)
        ascending &= lim[i] > lim[i - 1];
    EXPECT(ascending, "limits ascend");
    EXPECT(tb_hist_bucket(0.0) == 776, "0 -> %ld", tb_hist_bucket(0.0));
    EXPECT(tb_hist_bucket(-1e-13) == 775, "-1e-13 -> %ld", tb_hist_bucket(-1e-13));
    EXPECT(tb_hist_bucket(1e-12) == 777, "1e-12 -> %ld (a limit belongs to the bucket above it)",
           tb_hist_bucket(1e-12));
    EXPECT(tb_hist_bucket(-INFINITY) == 0 && tb_hist_bucket(INFINITY) == (long)n - 1 && tb_hist_bucket(NAN) == -1,
           "-inf, inf, nan -> %ld %ld %ld", tb_hist_bucket(-INFINITY), tb_hist_bucket(INFINITY),
           tb_hist_bucket(NAN));
    for (size_t i = 1; i + 1 < n; i++)
        if (tb_hist_bucket(lim[i]) != (long)i + 1 || tb_hist_bucket(nextafter(lim[i], -INFINITY)) != (long)i) {
            EXPECT(0, "limit %zu (%g) not on the edge of buckets %zu and %zu", i, lim[i], i, i + 1);
            break;
        }
    /* the float table agrees with the binary search at both ends and the
     * middle of every one of its intervals, and on both sides of every limit */
    long disagree = 0;
    for (uint32_t key = 0; key < 65536; key++)
        for (uint32_t low = 0; low <= 0xffffu; low += 0x7fffu) {
            uint32_t bits = (key << 16) | low;
            float f;
            memcpy(&f, &bits, sizeof f);
            disagree += tb_hist_bucket_f(f) != tb_hist_bucket(f);
        }
    for (size_t i = 0; i < n; i++) {
        const float f = (float)lim[i];
        const float near[3] = {nextafterf(f, -INFINITY), f, nextafterf(f, INFINITY)};
        for (int k = 0; k < 3; k++)
            disagree += tb_hist_bucket_f(near[k]) != tb_hist_bucket(near[k]);
    }
    EXPECT(disagree == 0, "%ld floats binned differently by the table", disagree);
    /* two pieces of one tensor add up to the whole */
    const float x[6] = {0.5f, -0.25f, 0.0f, 3.0f, NAN, -0.25f};
    const size_t K = tb_hist_sums_len();
    double *whole = calloc(K, sizeof *whole), *parts = calloc(K, sizeof *parts), we[2], pe[2], qe[2];
    double *q = calloc(K, sizeof *q);
    tb_hist_reset(whole, we);
    tb_hist_add(whole, we, x, 6);
    EXPECT(whole[TB_HIST_NUM] == 5 && whole[TB_HIST_SUM] == 3.0 && whole[TB_HIST_SUMSQ] == 0.25 + 0.125 + 9.0 &&
               we[TB_HIST_MAX] == 3.0 && we[TB_HIST_NEGMIN] == 0.25,
           "num %g sum %g sumsq %g max %g min %g", whole[TB_HIST_NUM], whole[TB_HIST_SUM], whole[TB_HIST_SUMSQ],
           we[TB_HIST_MAX], -we[TB_HIST_NEGMIN]);
    EXPECT(whole[TB_HIST_SUMS + tb_hist_bucket(-0.25)] == 2, "-0.25 twice");
    tb_hist_reset(parts, pe);
    tb_hist_reset(q, qe);
    tb_hist_add(parts, pe, x, 2);
    tb_hist_add(q, qe, x + 2, 4);
    int same = 1;
    for (size_t i = 0; i < K; i++)
        same &= parts[i] + q[i] == whole[i];
    EXPECT(same && fmax(pe[0], qe[0]) == we[0] && fmax(pe[1], qe[1]) == we[1], "pieces add to the whole");
    free(whole);
    free(parts);
    free(q);
}

typedef struct seen {
    char tags[16][64];
    double values[16];
    int integer[16];
    int n;
} seen_t;

static void collect(void *ctx, const char *tag, const json_t *leaf, double value)
{
    seen_t *s = ctx;
    if (s->n < 16) {
        snprintf(s->tags[s->n], sizeof s->tags[0], "%s", tag);
        s->values[s->n] = value;
        s->integer[s->n] = json_is_integer(leaf);
    }
    s->n++;
}

static void test_leaves(void)
{
    json_error_t err;
    json_t *j = json_loads("{\"step\": 7, \"loss\": 1.5, \"time\": {\"forward\": 0.25, \"x\": {\"y\": 2}},"
                           " \"expert_tokens\": [[1, 2], [3]], \"name\": \"s\", \"grad_norm\": null,"
                           " \"skipped\": true, \"empty\": {}, \"moe_layers\": [{\"aux\": 0.5}], \"new_metric\": 4}",
                           JSON_PRESERVE_ORDER, &err);
    EXPECT(j != NULL, "json: %s", err.text);
    seen_t s = {.n = 0};
    tb_leaves(j, collect, &s);
    /* a number at the top goes under its group (issue 46: 23 tags had no
     * TensorBoard section), an unknown one under other/ */
    static const char *want[] = {"loss/loss", "time/forward", "time/x/y", "expert_tokens/0/0", "expert_tokens/0/1",
                                 "expert_tokens/1/0", "optimizer/skipped", "moe_layers/0/aux", "other/new_metric"};
    static const double vals[] = {1.5, 0.25, 2, 1, 2, 3, 1, 0.5, 4};
    EXPECT(s.n == 9, "%d leaves", s.n);
    for (int i = 0; i < 9 && i < s.n; i++)
        EXPECT(!strcmp(s.tags[i], want[i]) && s.values[i] == vals[i], "leaf %d: %s = %g (want %s = %g)", i,
               s.tags[i], s.values[i], want[i], vals[i]);
    EXPECT(s.integer[2] && !s.integer[0], "integers told from reals");
    json_decref(j);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    *n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void test_events(const char *dir)
{
    tb_events_t *w = tb_events_open(dir);
    tb_events_session_start(w, 3);
    tb_events_scalars_begin(w, 3);
    tb_events_scalar(w, "loss", 2.5);
    tb_events_scalar(w, "time/forward", 0.125);
    tb_events_scalars_end(w);
    char path[700];
    snprintf(path, sizeof path, "%s", tb_events_path(w));
    tb_events_close(w);
    const char *base = strrchr(path, '/') + 1;
    EXPECT(!strncmp(base, "events.out.tfevents.", 20), "file name %s", base);
    /* a second file sorts after the first even within the same second */
    tb_events_t *w2 = tb_events_open(dir);
    EXPECT(strcmp(strrchr(tb_events_path(w2), '/') + 1, base) > 0, "%s sorts after %s",
           strrchr(tb_events_path(w2), '/') + 1, base);
    tb_events_close(w2);
    size_t n;
    unsigned char *buf = (unsigned char *)slurp(path, &n);
    EXPECT(buf != NULL, "read %s", path);
    if (!buf)
        return;
    /* records: length, masked CRC of the length, payload, masked CRC of the payload */
    size_t pos = 0;
    int records = 0, good = 1;
    while (pos + 12 <= n) {
        uint64_t len = le(buf + pos, 8);
        good &= le(buf + pos + 8, 4) == crc32c_mask(crc32c(buf + pos, 8));
        good &= pos + 16 + len <= n && le(buf + pos + 12 + len, 4) == crc32c_mask(crc32c(buf + pos + 12, len));
        if (records == 0) {
            /* Event {wall_time: double (9 bytes), file_version: "brain.Event:2"} */
            const unsigned char *p = buf + pos + 12;
            good &= len == 9 + 15 && p[0] == 0x09 && p[9] == 0x1a && p[10] == 13 && !memcmp(p + 11, "brain.Event:2", 13);
        }
        if (records == 1) {
            /* Event {wall_time, step: 3, session_log (field 7): {status: START}} */
            const unsigned char *p = buf + pos + 12;
            good &= len == 9 + 2 + 4 && p[9] == 0x10 && p[10] == 3 && p[11] == 0x3a && p[12] == 2 && p[13] == 0x08 &&
                    p[14] == 1;
        }
        pos += 16 + len;
        records++;
    }
    EXPECT(good && pos == n && records == 3, "%d whole records with good CRCs over %zu of %zu bytes", records, pos, n);
    free(buf);
}

static void write_rows(const char *dir, long from, long to)
{
    tb_csv_t *c = tb_csv_open(dir, from);
    json_t *r = json_real(0.5), *i = json_integer(12345678901LL);
    for (long s = from; s <= to; s++) {
        tb_csv_scalar(c, "moe_layers/0/aux", s, r, 0.5 * s);
        tb_csv_scalar(c, "tokens", s, i, 12345678901.0);
    }
    tb_csv_close(c);
    json_decref(r);
    json_decref(i);
}

static void test_csv(const char *dir)
{
    char name[64];
    tb_csv_file_name("a/b c", name, sizeof name);
    EXPECT(!strcmp(name, "a_b_c.csv"), "%s", name);
    write_rows(dir, 1, 4);
    /* a resumed run from step 3: rows 3 and 4 are replaced, not doubled */
    write_rows(dir, 3, 5);
    char path[700];
    snprintf(path, sizeof path, "%s/moe_layers_0_aux.csv", dir);
    size_t n;
    char *text = slurp(path, &n);
    EXPECT(text && !strcmp(text, "step,moe_layers/0/aux\n1,0.5\n2,1\n3,1.5\n4,2\n5,2.5\n"), "aux.csv:\n%s", text);
    free(text);
    snprintf(path, sizeof path, "%s/tokens.csv", dir);
    text = slurp(path, &n);
    EXPECT(text && !strncmp(text, "step,tokens\n1,12345678901\n", 26), "tokens.csv:\n%s", text);
    free(text);
    /* a run started over: the old rows go, the header stays */
    write_rows(dir, 1, 1);
    snprintf(path, sizeof path, "%s/moe_layers_0_aux.csv", dir);
    text = slurp(path, &n);
    EXPECT(text && !strcmp(text, "step,moe_layers/0/aux\n1,0.5\n"), "aux.csv after a restart:\n%s", text);
    free(text);
}

int main(void)
{
    test_crc32c();
    test_pb();
    test_hist();
    test_leaves();
    char dir[] = "/tmp/fabula-test-tboard-XXXXXX";
    EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    char ev[600], csv[600];
    snprintf(ev, sizeof ev, "%s/ev", dir);
    snprintf(csv, sizeof csv, "%s/csv", dir);
    mkdir(ev, 0755);
    mkdir(csv, 0755);
    test_events(ev);
    test_csv(csv);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
