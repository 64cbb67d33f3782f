/* Machine files (docs/plan.md, "Machine files"): one JSON object per node
 * type. Every figure is an object {"value": number, "source": "..."} so a
 * number never travels without where it came from; "assumption": true
 * marks a figure that is a judgement rather than a measurement or a
 * datasheet. Unknown keys are refused by name: a misspelt key would
 * otherwise leave a figure at its default without a word. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/regular_file.h"
#include "plan/plan.h"
#include "util/error.h"

typedef struct {
    const char *what;
    char *err;
    size_t errlen;
} ctx_t;

__attribute__((format(printf, 2, 3))) static int fail(const ctx_t *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "machine file %s: %s", c->what, msg);
    return -1;
}

static int check_keys(const ctx_t *c, json_t *obj, const char *prefix, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, key);
        if (!ok)
            return fail(c, "unknown key '%s%s'", prefix, key);
    }
    return 0;
}

/* A figure at obj[key] ("path" names it): 0 and *out set, 1 absent (and
 * not required), -1 error. */
static int figure(const ctx_t *c, json_t *obj, const char *key, const char *path, int required, double lo,
                  double *out)
{
    json_t *f = json_object_get(obj, key);
    if (!f) {
        if (required)
            return fail(c, "key '%s' is required", path);
        return 1;
    }
    if (!json_is_object(f))
        return fail(c, "key '%s': expected an object {\"value\": number, \"source\": \"...\"}", path);
    static const char *const keys[] = {"value", "source", "assumption", NULL};
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s.", path);
    if (check_keys(c, f, prefix, keys))
        return -1;
    json_t *v = json_object_get(f, "value"), *s = json_object_get(f, "source"), *a = json_object_get(f, "assumption");
    if (!v || !json_is_number(v))
        return fail(c, "key '%s.value': expected a number", path);
    if (!s || !json_is_string(s) || json_string_length(s) == 0)
        return fail(c, "key '%s.source': expected a non-empty string saying where the figure comes from", path);
    if (a && !json_is_boolean(a))
        return fail(c, "key '%s.assumption': expected true or false", path);
    const double x = json_number_value(v);
    if (!isfinite(x) || x < lo || (lo > 0 && x <= 0))
        return fail(c, "key '%s.value': %g is out of range (expected %s)", path, x, lo > 0 ? "> 0" : ">= 0");
    *out = x;
    return 0;
}

static int parse_link(const ctx_t *c, json_t *root, const char *key, plan_link_t *l)
{
    json_t *o = json_object_get(root, key);
    if (!o)
        return fail(c, "key '%s' is required", key);
    if (!json_is_object(o))
        return fail(c, "key '%s': expected an object with latency_s and bandwidth", key);
    static const char *const keys[] = {"latency_s", "bandwidth", NULL};
    char prefix[64], path[96];
    snprintf(prefix, sizeof prefix, "%s.", key);
    if (check_keys(c, o, prefix, keys))
        return -1;
    snprintf(path, sizeof path, "%s.latency_s", key);
    if (figure(c, o, "latency_s", path, 1, 0.0, &l->latency_s) < 0)
        return -1;
    snprintf(path, sizeof path, "%s.bandwidth", key);
    if (figure(c, o, "bandwidth", path, 1, 1e-300, &l->bandwidth) < 0)
        return -1;
    return 0;
}

/* "sync_wait": {"ranks", "per_pass", "per_block"}, each a figure
 * (docs/plan.md, "Synchronisation waits"); absent: no waits modelled. */
static int parse_sync(const ctx_t *c, json_t *root, plan_machine_t *m)
{
    json_t *o = json_object_get(root, "sync_wait");
    if (!o)
        return 0;
    if (!json_is_object(o))
        return fail(c, "key 'sync_wait': expected an object with ranks, per_pass and per_block");
    static const char *const keys[] = {"ranks", "per_pass", "per_block", NULL};
    if (check_keys(c, o, "sync_wait.", keys))
        return -1;
    double ranks;
    if (figure(c, o, "ranks", "sync_wait.ranks", 1, 1.0, &ranks) < 0 ||
        figure(c, o, "per_pass", "sync_wait.per_pass", 1, 0.0, &m->sync_wait_pass) < 0 ||
        figure(c, o, "per_block", "sync_wait.per_block", 1, 0.0, &m->sync_wait_block) < 0)
        return -1;
    if (ranks != floor(ranks) || ranks > 1 << 20)
        return fail(c, "key 'sync_wait.ranks.value': expected a whole number of ranks, got %g", ranks);
    m->sync_ranks = (int)ranks;
    return 0;
}

int plan_machine_parse(const char *text, const char *what, plan_machine_t *m, char *err, size_t errlen)
{
    const ctx_t c = {what, err, errlen};
    memset(m, 0, sizeof *m);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fail(&c, "line %d: %s", je.line, je.text);
    int rc = -1;
    if (!json_is_object(root)) {
        fail(&c, "expected a JSON object");
        goto out;
    }
    static const char *const keys[] = {"format", "name", "description", "calibrated", "devices_per_node", "flops",
                                       "attention_flops", "expert_flops", "gemm_flops", "memory_bandwidth", "device_memory",
                                       "host_memory", "host_link_bandwidth", "step_overhead_s",
                                       "microbatch_overhead_s", "intra", "inter", "sync_wait", "ranks_per_cpu",
                                       "overlap", NULL};
    if (check_keys(&c, root, "", keys))
        goto out;
    json_t *fmt = json_object_get(root, "format");
    if (!fmt || !json_is_string(fmt) || strcmp(json_string_value(fmt), "fabula-machine-1") != 0) {
        fail(&c, "key 'format': expected \"fabula-machine-1\"");
        goto out;
    }
    json_t *name = json_object_get(root, "name");
    if (!name || !json_is_string(name) || json_string_length(name) == 0) {
        fail(&c, "key 'name': expected a non-empty string");
        goto out;
    }
    snprintf(m->name, sizeof m->name, "%s", json_string_value(name));
    json_t *desc = json_object_get(root, "description"), *cal = json_object_get(root, "calibrated");
    if (desc && !json_is_string(desc)) {
        fail(&c, "key 'description': expected a string");
        goto out;
    }
    if (cal && !json_is_string(cal)) {
        fail(&c, "key 'calibrated': expected a string (the command and date)");
        goto out;
    }
    double dpn;
    if (figure(&c, root, "devices_per_node", "devices_per_node", 1, 1.0, &dpn) < 0)
        goto out;
    if (dpn != floor(dpn) || dpn > 1 << 20) {
        fail(&c, "key 'devices_per_node.value': expected a whole number of ranks, got %g", dpn);
        goto out;
    }
    m->devices_per_node = (int)dpn;
    m->overlap = 1.0;
    if (figure(&c, root, "flops", "flops", 1, 1e-300, &m->flops) < 0 ||
        figure(&c, root, "attention_flops", "attention_flops", 0, 1e-300, &m->attention_flops) < 0 ||
        figure(&c, root, "expert_flops", "expert_flops", 0, 1e-300, &m->expert_flops) < 0 ||
        figure(&c, root, "gemm_flops", "gemm_flops", 0, 1e-300, &m->gemm_flops) < 0 ||
        figure(&c, root, "memory_bandwidth", "memory_bandwidth", 0, 0.0, &m->memory_bandwidth) < 0 ||
        figure(&c, root, "device_memory", "device_memory", 1, 1e-300, &m->device_memory) < 0 ||
        figure(&c, root, "host_memory", "host_memory", 1, 1e-300, &m->host_memory) < 0 ||
        figure(&c, root, "host_link_bandwidth", "host_link_bandwidth", 0, 0.0, &m->host_link_bandwidth) < 0 ||
        figure(&c, root, "step_overhead_s", "step_overhead_s", 0, 0.0, &m->step_overhead_s) < 0 ||
        figure(&c, root, "microbatch_overhead_s", "microbatch_overhead_s", 0, 0.0, &m->microbatch_overhead_s) < 0 ||
        figure(&c, root, "ranks_per_cpu", "ranks_per_cpu", 0, 1e-300, &m->ranks_per_cpu) < 0 ||
        figure(&c, root, "overlap", "overlap", 0, 0.0, &m->overlap) < 0 ||
        parse_link(&c, root, "intra", &m->intra) || parse_link(&c, root, "inter", &m->inter) ||
        parse_sync(&c, root, m))
        goto out;
    if (m->overlap > 1.0) {
        fail(&c, "key 'overlap.value': %g is out of range (expected a share from 0 to 1)", m->overlap);
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int plan_machine_load(const char *path, plan_machine_t *m, char *err, size_t errlen)
{
    FILE *f;
    char why[1024];
    int code = regular_file_fopen(path, &f, why, sizeof why);
    if (code) {
        if (code == FB_EXIT_IO)
            snprintf(err, errlen, "machine file %s: cannot open: %s", path, strerror(errno));
        else
            snprintf(err, errlen, "machine file %s", why);
        return -1;
    }
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    const int bad = ferror(f), big = !feof(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "machine file %s: cannot read", path);
        return -1;
    }
    if (big) {
        snprintf(err, errlen, "machine file %s: larger than %zu bytes", path, sizeof buf - 1);
        return -1;
    }
    buf[n] = 0;
    return plan_machine_parse(buf, path, m, err, errlen);
}
