#include "io/safetensors_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

struct st_writer {
    char *path;
    int fd;
    uint64_t expect, written;
};

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf_t;

static void sb_put(sbuf_t *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) + 256;
        b->p = fb_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf_t *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf_t *b, const char *fmt, unsigned long long v)
{
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, fmt, v);
    sb_put(b, tmp, (size_t)k);
}

/* A JSON string: quotes, backslashes and control characters escaped (as
 * serde_json does); other bytes as they are. */
static void sb_json_string(sbuf_t *b, const char *s)
{
    sb_str(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            char e[2] = {'\\', (char)*c};
            sb_put(b, e, 2);
        } else if (*c < 0x20) {
            sb_fmt(b, "\\u%04llx", *c);
        } else {
            sb_put(b, (const char *)c, 1);
        }
    }
    sb_str(b, "\"");
}

uint8_t *safetensors_header(const st_tensor_t *t, size_t n, size_t *len)
{
    sbuf_t b = {0};
    sb_put(&b, "\0\0\0\0\0\0\0\0", 8); /* the length, filled in below */
    sb_str(&b, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        FB_ASSERT(t[i].ndim >= 0 && t[i].ndim <= ST_MAX_DIMS);
        sb_str(&b, ",");
        sb_json_string(&b, t[i].name);
        sb_str(&b, ":{\"dtype\":");
        sb_json_string(&b, t[i].dtype);
        sb_str(&b, ",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++)
            sb_fmt(&b, d ? ",%llu" : "%llu", (unsigned long long)t[i].shape[d]);
        sb_fmt(&b, "],\"data_offsets\":[%llu,", (unsigned long long)off);
        off += t[i].nbytes;
        sb_fmt(&b, "%llu]}", (unsigned long long)off);
    }
    sb_str(&b, "}");
    /* the data then starts on a multiple of 8, so every tensor of an 8-byte
     * aligned mapping is aligned for its dtype (safetensors pads alike) */
    while ((b.n - 8) % 8)
        sb_str(&b, " ");
    uint64_t hlen = b.n - 8;
    for (int k = 0; k < 8; k++)
        b.p[k] = (char)((hlen >> (8 * k)) & 0xff);
    *len = b.n;
    return (uint8_t *)b.p;
}

static void write_all(st_writer_t *w, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            fb_fatal(FB_EXIT_IO, "%s: cannot write: %s", w->path, strerror(errno));
        p += k;
        n -= (size_t)k;
    }
}

st_writer_t *safetensors_create(const char *path, const st_tensor_t *t, size_t n)
{
    st_writer_t *w = fb_calloc(1, sizeof *w);
    w->path = fb_strdup(path);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot create: %s", path, strerror(errno));
    for (size_t i = 0; i < n; i++)
        w->expect += t[i].nbytes;
    size_t hlen;
    uint8_t *h = safetensors_header(t, n, &hlen);
    write_all(w, h, hlen);
    free(h);
    return w;
}

void safetensors_append(st_writer_t *w, const void *data, size_t nbytes)
{
    FB_ASSERT(w->written + nbytes <= w->expect);
    write_all(w, data, nbytes);
    w->written += nbytes;
}

uint64_t safetensors_finish(st_writer_t *w)
{
    FB_ASSERT(w->written == w->expect);
    if (fsync(w->fd) != 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot fsync: %s", w->path, strerror(errno));
    off_t size = lseek(w->fd, 0, SEEK_END);
    if (size < 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot seek: %s", w->path, strerror(errno));
    if (close(w->fd) != 0)
        fb_fatal(FB_EXIT_IO, "%s: cannot close: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return (uint64_t)size;
}
