/* src/io: atomic files, mkdir -p, the run directory and the HDF5 tensor
 * helpers, including their failure exits (checked in forked children). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/h5tensor.h"
#include "io/regular_file.h"
#include "io/rundir.h"
#include "testlib.h"

static char root[512];

static void check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int cond, const char *fmt, ...)
{
    checks++;
    if (cond)
        return;
    failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static char *path_in(const char *rel)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", root, rel);
    return p;
}

/* Whole file as a NUL-terminated string (NULL if it cannot be read). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            s = realloc(s, cap);
        }
    }
    fclose(f);
    if (!s)
        return NULL;
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

static int count_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Runs fn(arg) in a child with stderr captured; returns its exit status
 * (-1 if it did not exit normally) and its stderr in *err (malloc'd). */
static int run_child(void (*fn)(const void *), const void *arg, char **err)
{
    char *errpath = path_in("child.err");
    int st = testlib_child_exit(fn, arg, errpath);
    *err = slurp(errpath, NULL);
    if (!*err)
        *err = strdup("");
    return st;
}

static void expect_exit(void (*fn)(const void *), const void *arg, int code, const char *must_contain,
                        const char *what)
{
    char *err;
    int got = run_child(fn, arg, &err);
    check(got == code, "%s: exit %d, expected %d (stderr: %s)", what, got, code, err);
    check(strstr(err, must_contain) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, must_contain);
    printf("  %s -> exit %d: %s", what, got, err);
    free(err);
}

/* ------------------------------------------------------------ atomic files */

static void child_write(const void *p) { atomic_write_file(p, "x", 1); }
static void child_mkdirs(const void *p) { fs_mkdirs(p); }

static void test_atomic(void)
{
    printf("atomic_write_file / fs_mkdirs:\n");
    char *f = path_in("a.txt");
    const char *v1 = "first version\n", *v2 = "second, longer version of the file\n", *v3 = "3";
    atomic_write_file(f, v1, strlen(v1));
    char *s = slurp(f, NULL);
    check(s && strcmp(s, v1) == 0, "content after first write");
    free(s);
    atomic_write_file(f, v2, strlen(v2));
    s = slurp(f, NULL);
    check(s && strcmp(s, v2) == 0, "content after overwrite with longer text");
    free(s);
    atomic_write_file(f, v3, strlen(v3));
    s = slurp(f, NULL);
    check(s && strcmp(s, v3) == 0, "content after overwrite with shorter text");
    free(s);
    atomic_write_file(f, "", 0);
    size_t n = 99;
    s = slurp(f, &n);
    check(s && n == 0, "empty write gives an empty file");
    free(s);
    struct stat st;
    check(stat(f, &st) == 0 && S_ISREG(st.st_mode), "a regular file at the final path");
    check(count_tmp_files(root) == 0, "no .tmp. file left after writes");

    /* binary data with NUL bytes round-trips byte for byte */
    unsigned char bin[1000];
    for (int i = 0; i < 1000; i++)
        bin[i] = (unsigned char)(i * 7 + 3);
    atomic_write_file(path_in("bin"), bin, sizeof bin);
    s = slurp(path_in("bin"), &n);
    check(s && n == sizeof bin && memcmp(s, bin, n) == 0, "binary content");
    free(s);

    fs_mkdirs(path_in("d1/d2/d3/d4"));
    check(is_dir(path_in("d1/d2/d3/d4")), "nested directories created");
    fs_mkdirs(path_in("d1/d2/d3/d4"));
    fs_mkdirs(path_in("d1//d2/x/"));
    check(is_dir(path_in("d1/d2/x")), "existing prefix, doubled and trailing slashes");

    /* failures: a path under a regular file, a rename onto a directory */
    expect_exit(child_write, path_in("a.txt/sub.txt"), 4, "a.txt/sub.txt", "write under a regular file");
    expect_exit(child_mkdirs, path_in("a.txt/sub/dir"), 4, "a.txt", "mkdirs under a regular file");
    fs_mkdirs(path_in("adir/inner"));
    expect_exit(child_write, path_in("adir"), 4, "rename", "write onto a non-empty directory");
    check(count_tmp_files(root) == 0, "temporary file removed after a failed rename");
}

/* ------------------------------------------------------------ run dir */

static void test_rundir(void)
{
    printf("rundir / metrics:\n");
    const char *cfg = "{\n  \"model\": {\"hidden_size\": 64},\n  \"lr\": 0.0003\n}";
    char *dir = path_in("runs/r1");
    rundir_prepare(dir, cfg);
    char cfgpath[1100];
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", dir);
    char *s = slurp(cfgpath, NULL);
    check(s && strncmp(s, cfg, strlen(cfg)) == 0 && strcmp(s + strlen(cfg), "\n") == 0,
          "config.json is the text plus a final newline");
    free(s);
    json_error_t jerr;
    json_t *c = json_load_file(cfgpath, 0, &jerr);
    check(c && json_integer_value(json_object_get(json_object_get(c, "model"), "hidden_size")) == 64,
          "config.json parses back");
    json_decref(c);
    rundir_prepare(dir, cfg); /* again: existing directory, replaced file */
    check(count_tmp_files(dir) == 0, "no temporary file in the run directory");

    const double reals[3] = {0.1234567891234, 2.5e-7, 12345.678901};
    metrics_t *m = metrics_open(dir);
    for (int i = 0; i < 3; i++) {
        json_t *r = json_pack("{s:I, s:f, s:s, s:{s:b}}", "step", (json_int_t)i, "loss", reals[i], "phase",
                              "train", "extra", "ok", 1);
        metrics_write(m, r);
        json_decref(r);
    }
    metrics_close(m);
    /* a resumed run appends */
    m = metrics_open(dir);
    json_t *r = json_pack("{s:I, s:f}", "step", (json_int_t)3, "loss", 1.0);
    metrics_write(m, r);
    json_decref(r);
    metrics_close(m);

    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
    s = slurp(mpath, NULL);
    check(s != NULL, "metrics.jsonl readable");
    int lines = 0;
    for (char *line = s, *next; s && *line; line = next) {
        char *nl = strchr(line, '\n');
        check(nl != NULL, "every record ends with a newline");
        if (!nl)
            break;
        *nl = '\0';
        next = nl + 1;
        check(strchr(line, ' ') == NULL, "line %d is compact", lines);
        json_t *j = json_loads(line, 0, &jerr);
        check(j != NULL, "line %d parses: %s", lines, line);
        if (j) {
            check(json_integer_value(json_object_get(j, "step")) == lines, "line %d step", lines);
            check(strncmp(line, "{\"step\":", 8) == 0, "line %d keeps key order", lines);
            if (lines < 3) {
                /* expected: the value rounded to 9 significant digits */
                char want[64];
                snprintf(want, sizeof want, "%.9g", reals[lines]);
                double got = json_real_value(json_object_get(j, "loss"));
                check(got == strtod(want, NULL), "line %d real printed with 9 digits (%.17g vs %s)", lines, got,
                      want);
                check(strcmp(json_string_value(json_object_get(j, "phase")), "train") == 0, "line %d string",
                      lines);
            }
            json_decref(j);
        }
        lines++;
    }
    check(lines == 4, "4 lines after append (got %d)", lines);
    free(s);
    printf("  config.json, %d metrics lines checked\n", lines);
}

/* ------------------------------------------------------------ HDF5 */

static void child_read_wrong_size(const void *path)
{
    hid_t f = h5_open_read(path);
    float buf[11];
    h5_read_f32(f, "/w/f32", buf, 11);
}

static void child_read_missing(const void *path)
{
    hid_t f = h5_open_read(path);
    double x;
    h5_read_f64(f, "/w/nothing", &x, 1);
}

static void child_open(const void *path) { h5_open_read(path); }

/* An attribute written the way h5py writes str: variable-length UTF-8. */
static void write_vlen_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    check(a >= 0 && H5Awrite(a, t, &value) >= 0, "write variable-length attribute %s", name);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

/* A fixed-length, space-padded ASCII attribute (Fortran-style writers). */
static void write_spacepad_attr(hid_t obj, const char *name, const char *padded)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(padded));
    H5Tset_strpad(t, H5T_STR_SPACEPAD);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    check(a >= 0 && H5Awrite(a, t, padded) >= 0, "write space-padded attribute %s", name);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

/* Two processes, one run directory: the second is refused and told who
 * holds it; a SIGKILLed holder leaves no stale lock. */
static void test_rundir_lock(void)
{
    printf("rundir lock:\n");
    char *dir = path_in("runs/locked");
    int ready[2];
    if (pipe(ready) != 0) {
        perror("pipe");
        exit(1);
    }
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(1);
    }
    if (child == 0) {
        char h[8];
        int ok = rundir_lock(dir, h, sizeof h);
        if (write(ready[1], ok ? "1" : "0", 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    char c = 0;
    check(read(ready[0], &c, 1) == 1 && c == '1', "the first process takes the lock");
    char holder[256] = "";
    int got = rundir_lock(dir, holder, sizeof holder);
    char pid[64];
    snprintf(pid, sizeof pid, "pid %ld", (long)child);
    check(got == 0, "a second process is refused while the first holds the lock");
    check(strstr(holder, pid) != NULL && strncmp(holder, "host ", 5) == 0,
          "the refusal names the holder's host and pid: '%s' (want '%s')", holder, pid);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    check(rundir_lock(dir, holder, sizeof holder) == 1, "after the holder is killed the lock is free (not stale)");
    check(rundir_lock(dir, holder, sizeof holder) == 1, "taking it again in the same process is a no-op");
    char self[64];
    snprintf(self, sizeof self, "pid %ld", (long)getpid());
    char *text = NULL;
    char lockpath[1100];
    snprintf(lockpath, sizeof lockpath, "%s/.lock", dir);
    text = slurp(lockpath, NULL);
    check(text && strstr(text, self) != NULL, "the lock file names the new holder: '%s'", text ? text : "");
    free(text);
    close(ready[0]);
    close(ready[1]);
}

static void test_h5(void)
{
    printf("h5tensor:\n");
    char *path = path_in("t.h5");

    float f32[12];
    double f64[5];
    int i32[12];
    long long i64[4];
    for (int i = 0; i < 12; i++) {
        f32[i] = (float)(i * 0.25 - 1.0) / 3.0f;
        i32[i] = i * i * (i % 2 ? -1 : 1) * 1000;
    }
    for (int i = 0; i < 5; i++)
        f64[i] = exp((double)i) / 7.0;
    for (int i = 0; i < 4; i++)
        i64[i] = (1LL << 40) * (i + 1) - i;
    const long long d_f32[2] = {3, 4}, d_f64[1] = {5}, d_i32[3] = {2, 3, 2}, d_i64[2] = {2, 2}, d_empty[1] = {0};
    const double scalar = -1234.5678;

    char big[100001];
    for (int i = 0; i < 100000; i++)
        big[i] = (char)('a' + i % 26);
    big[100000] = '\0';

    hid_t f = h5_create(path);
    h5_write_f32(f, "/w/f32", f32, 2, d_f32);
    h5_write_f64(f, "/w/f64", f64, 1, d_f64);
    h5_write_i32(f, "/deep/er/still/i32", i32, 3, d_i32);
    h5_write_i64(f, "i64", i64, 2, d_i64);
    h5_write_f64(f, "/scalar", &scalar, 0, NULL);
    h5_write_f32(f, "/empty", NULL, 1, d_empty);
    h5_write_attr_string(f, "format", "fabula-test");
    h5_write_attr_string(f, "format", "fabula-test-v2"); /* replaces */
    h5_write_attr_string(f, "empty", "");
    h5_write_attr_string(f, "utf8", "Ma\xc3\xaetre \xe2\x80\x94 r\xc3\xa9" "cit");
    h5_write_attr_string(f, "big", big);
    h5_write_attr_i64(f, "step", 1234567890123LL);
    write_vlen_attr(f, "h5py_style", "variable length \xc3\xa9t\xc3\xa9");
    write_spacepad_attr(f, "spacepad", "padded   ");
    h5_close(f);

    f = h5_open_read(path);
    int nd;
    long long dims[H5_MAX_RANK];
    size_t n = h5_dataset_numel(f, "/w/f32", &nd, dims);
    check(n == 12 && nd == 2 && dims[0] == 3 && dims[1] == 4, "f32 shape [3,4]");
    n = h5_dataset_numel(f, "/deep/er/still/i32", &nd, dims);
    check(n == 12 && nd == 3 && dims[0] == 2 && dims[1] == 3 && dims[2] == 2, "i32 shape [2,3,2]");
    n = h5_dataset_numel(f, "/scalar", &nd, dims);
    check(n == 1 && nd == 0, "scalar: 1 element, rank 0");
    check(h5_dataset_numel(f, "/empty", NULL, NULL) == 0, "empty dataset: 0 elements");

    float rf32[12];
    double rf64[12];
    int ri32[12];
    long long ri64[12];
    h5_read_f32(f, "/w/f32", rf32, 12);
    check(memcmp(rf32, f32, sizeof f32) == 0, "f32 round trip (bitwise)");
    h5_read_f64(f, "/w/f64", rf64, 5);
    check(memcmp(rf64, f64, sizeof f64) == 0, "f64 round trip (bitwise)");
    h5_read_i32(f, "/deep/er/still/i32", ri32, 12);
    check(memcmp(ri32, i32, sizeof i32) == 0, "i32 round trip");
    h5_read_i64(f, "/i64", ri64, 4);
    check(memcmp(ri64, i64, sizeof i64) == 0, "i64 round trip");
    check(h5_read_scalar_f64(f, "/scalar") == scalar, "scalar f64");
    h5_read_f32(f, "/empty", rf32, 0);

    /* conversions through the memory type */
    h5_read_f64(f, "/w/f32", rf64, 12);
    int ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= rf64[i] == (double)f32[i];
    check(ok, "f32 dataset read as f64");
    h5_read_f32(f, "/w/f64", rf32, 5);
    ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= rf32[i] == (float)f64[i];
    check(ok, "f64 dataset read as f32 (rounded)");
    h5_read_i64(f, "/deep/er/still/i32", ri64, 12);
    ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= ri64[i] == (long long)i32[i];
    check(ok, "i32 dataset read as i64");
    h5_read_f64(f, "/deep/er/still/i32", rf64, 12);
    ok = 1;
    for (int i = 0; i < 12; i++)
        ok &= rf64[i] == (double)i32[i];
    check(ok, "i32 dataset read as f64");

    char *a = h5_read_attr_string(f, "format");
    check(strcmp(a, "fabula-test-v2") == 0, "string attribute replaced (got '%s')", a);
    free(a);
    a = h5_read_attr_string(f, "empty");
    check(strcmp(a, "") == 0, "empty string attribute");
    free(a);
    a = h5_read_attr_string(f, "utf8");
    check(strcmp(a, "Ma\xc3\xaetre \xe2\x80\x94 r\xc3\xa9" "cit") == 0, "UTF-8 string attribute");
    free(a);
    a = h5_read_attr_string(f, "big");
    check(strcmp(a, big) == 0, "100 kB string attribute");
    free(a);
    a = h5_read_attr_string(f, "h5py_style");
    check(strcmp(a, "variable length \xc3\xa9t\xc3\xa9") == 0, "variable-length string attribute (got '%s')", a);
    free(a);
    a = h5_read_attr_string(f, "spacepad");
    check(strcmp(a, "padded") == 0, "space-padded attribute loses its padding (got '%s')", a);
    free(a);
    check(h5_read_attr_i64(f, "step") == 1234567890123LL, "i64 attribute");

    check(h5_exists(f, "/w/f32"), "exists: dataset");
    check(h5_exists(f, "/deep/er"), "exists: group");
    check(h5_exists(f, "/"), "exists: root");
    check(h5_exists(f, "i64"), "exists: relative path");
    check(!h5_exists(f, "/w/missing"), "missing leaf");
    check(!h5_exists(f, "/nope/deeper/x"), "missing parent");
    check(!h5_exists(f, "/w/f32/below"), "path through a dataset");
    h5_close(f);
    printf("  round trips: f32, f64, i32, i64, scalar, empty, conversions, 6 string attributes, i64 attribute\n");

    expect_exit(child_read_wrong_size, path, 3, "dataset /w/f32 has 12 elements, expected 11", "size mismatch");
    expect_exit(child_read_missing, path, 3, "no dataset /w/nothing", "missing dataset");
    expect_exit(child_open, path_in("no-such.h5"), 4, "no-such.h5", "open of a missing file");
    expect_exit(child_open, path_in("a.txt"), 4, "a.txt", "open of a non-HDF5 file");
}

/* h5_dataset_numel_stored: an extent the file stores is read (contiguous,
 * chunked, and deflated zeros at about 1000:1); one whose chunks were
 * never written is refused, exit 3, before anything is allocated from it. */
static void make_dataset(hid_t f, const char *name, hsize_t n, int chunked, int deflate, int write)
{
    hsize_t dims[1] = {n}, chunk[1] = {n < 65536 ? n : 65536};
    hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked)
        H5Pset_chunk(dcpl, 1, chunk);
    if (deflate)
        H5Pset_deflate(dcpl, 9);
    hid_t d = H5Dcreate2(f, name, H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    check(d >= 0, "create %s", name);
    if (write) {
        unsigned char *z = calloc(n, 1);
        check(z && H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, z) >= 0, "write %s", name);
        free(z);
    }
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
}

static void child_stored(const void *path)
{
    hid_t f = h5_open_read(path);
    h5_dataset_numel_stored(f, "/unwritten");
}

static void test_h5_stored(void)
{
    const char *path = path_in("stored.h5");
    hid_t f = h5_create(path);
    make_dataset(f, "/contiguous", 1000, 0, 0, 1);
    make_dataset(f, "/chunked", 200000, 1, 0, 1);
    make_dataset(f, "/zeros", 1 << 22, 1, 1, 1);
    make_dataset(f, "/unwritten", 1000000000, 1, 0, 0);
    h5_close(f);
    f = h5_open_read(path);
    check(h5_dataset_numel_stored(f, "/contiguous") == 1000, "contiguous");
    check(h5_dataset_numel_stored(f, "/chunked") == 200000, "chunked");
    check(h5_dataset_numel_stored(f, "/zeros") == 1 << 22, "deflated zeros");
    h5_close(f);
    expect_exit(child_stored, path, 3, "dataset /unwritten declares 1000000000 elements of 1 bytes but the file "
                                       "stores 0 bytes", "an extent never written");
}

/* regular_file_*: each kind of non-file refused with exit 3 naming it,
 * without blocking on a FIFO (the alarm turns a hang into a failure), a
 * missing file exit 4 with errno kept, a regular file (and a link to one)
 * opened for blocking reads. */
static void test_regular_file(void)
{
    alarm(20);
    const char *fifo = path_in("fifo"), *dir = path_in("dir.json"), *file = path_in("plain.json");
    check(mkfifo(fifo, 0600) == 0 && mkdir(dir, 0700) == 0, "mkfifo, mkdir");
    FILE *w = fopen(file, "w");
    check(w && fputs("{}", w) >= 0 && fclose(w) == 0, "write %s", file);
    check(symlink("plain.json", path_in("link.json")) == 0, "symlink");
    const struct {
        const char *path, *kind;
    } bad[] = {{fifo, "a FIFO"}, {dir, "a directory"}, {"/dev/null", "a character device"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char why[512], want[600];
        snprintf(want, sizeof want, "%s: not a regular file (%s)", bad[i].path, bad[i].kind);
        int fd = 7;
        int code = regular_file_open(bad[i].path, &fd, why, sizeof why);
        check(code == 3 && fd == -1 && !strcmp(why, want), "open %s: code %d, '%s'", bad[i].kind, code, why);
        FILE *f = stdin;
        code = regular_file_fopen(bad[i].path, &f, why, sizeof why);
        check(code == 3 && !f && !strcmp(why, want), "fopen %s: code %d, '%s'", bad[i].kind, code, why);
        code = regular_file_check(bad[i].path, why, sizeof why);
        check(code == 3 && !strcmp(why, want), "check %s: code %d, '%s'", bad[i].kind, code, why);
    }
    char why[512];
    int fd;
    int code = regular_file_open(path_in("missing.json"), &fd, why, sizeof why);
    check(code == 4 && errno == ENOENT && strstr(why, "missing.json: cannot open: No such file"),
          "missing: code %d, '%s'", code, why);
    FILE *f;
    code = regular_file_fopen(path_in("link.json"), &f, why, sizeof why);
    char buf[8] = "";
    check(code == 0 && f && fgets(buf, sizeof buf, f) && !strcmp(buf, "{}"), "a link to a file reads (%d)", code);
    if (f) {
        check(!(fcntl(fileno(f), F_GETFL) & O_NONBLOCK), "reads block as usual");
        fclose(f);
    }
    alarm(0);
    printf("  regular files only: FIFO, directory, device refused (3), missing (4), file and link read\n");
}

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int main(void)
{
    /* the directory name must not itself look like a leftover temp file */
    snprintf(root, sizeof root, "%s/test_io_dir_%ld", getenv("FB_BUILDDIR") ? getenv("FB_BUILDDIR") : ".",
             (long)getpid());
    if (mkdir(root, 0755) != 0) {
        perror(root);
        return 1;
    }
    test_atomic();
    test_rundir();
    test_rundir_lock();
    test_h5();
    test_h5_stored();
    test_regular_file();
    if (nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        perror("cleanup");
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
