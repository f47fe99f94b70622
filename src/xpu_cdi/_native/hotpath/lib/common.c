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

int xf_say(int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(xf_reason, sizeof(xf_reason), fmt, ap);
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

static char *vformat(const char *fmt, va_list ap)
{
    va_list copy;
    int n;
    char *p;

    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        n = 0;
    p = xf_alloc((size_t)n + 1);
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

int xf_read_fd(int fd, size_t limit, char **data, size_t *len)
{
    struct xf_buf b = {0};
    int rv = XF_OK;

    xf_buf_add(&b, "", 0);
    while (b.len <= limit) { /* at most limit + 1 bytes: enough to tell "too big" */
        char chunk[65536];
        size_t want = limit + 1 - b.len;
        ssize_t n = read(fd, chunk, want < sizeof(chunk) ? want : sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rv = xf_say(XF_ERR, "read failed: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        xf_buf_add(&b, chunk, (size_t)n);
    }
    if (rv == XF_OK && b.len > limit)
        rv = xf_say(XF_ERR, "larger than %zu bytes", limit);
    *data = b.data; /* also on failure: what was read (the hook hands it on) */
    *len = b.len;
    return rv;
}

int xf_read_file(const char *path, size_t limit, char **data, size_t *len, unsigned *mode)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int rv;

    if (fd < 0)
        return xf_say(XF_ERR, "cannot read '%s': %s", path, strerror(errno));
    if (mode != NULL) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            rv = xf_say(XF_ERR, "cannot stat %s: %s", path, strerror(errno));
            close(fd);
            return rv;
        }
        *mode = st.st_mode & 07777;
    }
    rv = xf_read_fd(fd, limit, data, len);
    close(fd);
    if (rv != XF_OK)
        return xf_say(rv, "'%s': %s", path, xf_strdup(xf_reason));
    return XF_OK;
}
