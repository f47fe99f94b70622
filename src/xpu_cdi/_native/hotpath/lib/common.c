/* Shared helpers of both binaries: see common.h. */
#include "lib/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char xf_reason[1024];
int xf_reason_named;

int xf_say(int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(xf_reason, sizeof(xf_reason), fmt, ap);
    va_end(ap);
    xf_reason_named = 0;
    return code;
}

int xf_wrap(int code, const char *fmt, ...)
{
    char what[sizeof(xf_reason)], cause[sizeof(xf_reason)];
    va_list ap;

    memcpy(cause, xf_reason, sizeof(cause));
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (snprintf(xf_reason, sizeof(xf_reason), "%s: %s", what, cause) >= (int)sizeof(xf_reason))
        memcpy(xf_reason + sizeof(xf_reason) - 4, "...", 4); /* one line, cut: say so */
    xf_reason_named = 0;
    return code;
}

int xf_named(int code)
{
    xf_reason_named = 1;
    return code;
}

int xf_append(int code, const char *fmt, ...)
{
    size_t n = strlen(xf_reason);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(xf_reason + n, sizeof(xf_reason) - n, fmt, ap);
    va_end(ap);
    return code;
}

static void out_of_memory(void)
{
    static const char msg[] = "xpu-cdi: out of memory\n";
    ssize_t unused = write(2, msg, sizeof(msg) - 1);
    (void)unused;
    _exit(1);
}

void *xf_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (p == NULL)
        out_of_memory();
    return p;
}

void *xf_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        out_of_memory();
    return p;
}

void *xf_realloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        out_of_memory();
    return p;
}

char *xf_strndup(const char *s, size_t n)
{
    char *p = xf_alloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xf_strdup(const char *s)
{
    return xf_strndup(s, strlen(s));
}

char *xf_strcat3(const char *a, const char *b, const char *c)
{
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *p = xf_malloc(na + nb + nc + 1);

    memcpy(p, a, na);
    memcpy(p + na, b, nb);
    memcpy(p + na + nb, c, nc + 1);
    return p;
}

/* One formatting pass for the usual short text (paths, names); a second
 * only for what does not fit the stack buffer. */
static char *vformat(const char *fmt, va_list ap)
{
    char small[256];
    va_list copy;
    int n;
    char *p;

    va_copy(copy, ap);
    n = vsnprintf(small, sizeof(small), fmt, copy);
    va_end(copy);
    if (n < 0)
        n = 0;
    p = xf_malloc((size_t)n + 1);
    if ((size_t)n < sizeof(small))
        memcpy(p, small, (size_t)n + 1);
    else
        vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *xf_printf(const char *fmt, ...)
{
    va_list ap;
    char *p;

    va_start(ap, fmt);
    p = vformat(fmt, ap);
    va_end(ap);
    return p;
}

void xf_buf_add(struct xf_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = xf_realloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void xf_buf_adds(struct xf_buf *b, const char *s)
{
    xf_buf_add(b, s, strlen(s));
}

void xf_buf_addf(struct xf_buf *b, const char *fmt, ...)
{
    va_list ap;
    char *p;

    va_start(ap, fmt);
    p = vformat(fmt, ap);
    va_end(ap);
    xf_buf_adds(b, p);
    free(p);
}

const char *xf_component(const char *p, size_t *len)
{
    while (*p == '/')
        p++;
    *len = strcspn(p, "/");
    return p;
}

/* A read that gives less than asked is the end for a regular file of known
 * size, and for one_piece: a /proc/<pid> file the kernel prints whole into
 * the reader's buffer (single_open).  Otherwise read to a 0 (a pipe, a
 * seq_file of many records, which comes a page at a time). */
static int read_fd(int fd, const struct stat *st, int one_piece, size_t limit, char **data, size_t *len)
{
    size_t cap, n = 0;
    char *buf;
    int rv = XF_OK, sized = st != NULL && S_ISREG(st->st_mode) && st->st_size > 0 && (size_t)st->st_size <= limit;
    int short_is_end = sized || one_piece;

    /* read straight into a buffer of the file's size (one more byte tells
     * that it grew); what reports no size (a pipe, /proc) starts at a page */
    cap = sized ? (size_t)st->st_size + 2 : 4096;
    buf = xf_malloc(cap);
    while (n <= limit) { /* at most limit + 1 bytes: enough to tell "too big" */
        size_t want = cap - 1 - n;
        ssize_t got;
        if (want == 0) {
            cap = cap * 2 > limit + 2 ? limit + 2 : cap * 2;
            buf = xf_realloc(buf, cap);
            want = cap - 1 - n;
        }
        got = read(fd, buf + n, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rv = xf_say(XF_ERR, "read failed: %s", strerror(errno));
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (short_is_end && (size_t)got < want)
            break;
    }
    buf[n] = '\0';
    if (rv == XF_OK && n > limit)
        rv = xf_say(XF_ERR, "larger than %zu bytes", limit);
    *data = buf; /* also on failure: what was read (the hook hands it on) */
    *len = n;
    return rv;
}

int xf_read_fd_stat(int fd, const struct stat *st, size_t limit, char **data, size_t *len)
{
    return read_fd(fd, st, 0, limit, data, len);
}

int xf_read_fd(int fd, size_t limit, char **data, size_t *len)
{
    struct stat st;

    return xf_read_fd_stat(fd, fstat(fd, &st) == 0 ? &st : NULL, limit, data, len);
}

static int read_file(const char *path, int one_piece, size_t limit, char **data, size_t *len, unsigned *mode)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int rv;
    struct stat st;
    int stated = mode != NULL || !one_piece; /* procfs reports no size */

    if (fd < 0)
        return xf_say(XF_ERR, "cannot read '%s': %s", path, strerror(errno));
    if (stated && fstat(fd, &st) != 0) {
        rv = xf_say(XF_ERR, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return rv;
    }
    if (mode != NULL)
        *mode = st.st_mode & 07777;
    rv = read_fd(fd, stated ? &st : NULL, one_piece, limit, data, len);
    close(fd);
    if (rv != XF_OK)
        return xf_wrap(rv, "'%s'", path);
    return XF_OK;
}

int xf_read_file(const char *path, size_t limit, char **data, size_t *len, unsigned *mode)
{
    return read_file(path, 0, limit, data, len, mode);
}

int xf_read_proc_one(const char *path, size_t limit, char **data, size_t *len)
{
    return read_file(path, 1, limit, data, len, NULL);
}
