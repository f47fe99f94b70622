/* See files.h. */
#include "lib/files.h"
#include "lib/collections.h"
#include "lib/common.h"
#include "lib/strings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DIR_BUF 32768

struct linux_dirent64 { /* getdents64(2) */
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* One hook run lists and reads the same spec dirs and indexes more than
 * once (may_request, the indexes, the specs): each is read from the kernel
 * once, and every later look gets the same answer. */
struct seen {
    struct seen *next;
    char *path;
    int rv;             /* xf_list_dir's, or xf_read_regular's RD_* */
    char **names;       /* a listing */
    size_t n;
    char *data;         /* a file */
    size_t len;
    struct stat st;
    const char *reason; /* xf_reason of a failed read */
};
static struct seen *listed, *read_files;

static struct seen *find(struct seen *list, const char *path)
{
    for (; list != NULL; list = list->next)
        if (strcmp(list->path, path) == 0)
            return list;
    return NULL;
}

static struct seen *remember(struct seen **list, const char *path)
{
    struct seen *e = xf_alloc(sizeof(*e));

    memset(e, 0, sizeof(*e));
    e->path = xf_strdup(path);
    e->next = *list;
    *list = e;
    return e;
}

/* getdents64 straight (opendir would fstat the dir to size its buffer). */
static int list_dir(const char *d, char ***names, size_t *n)
{
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK), err = 0;
    struct xf_ptrvec v = {0};
    char *buf;
    long got;

    *names = NULL;
    *n = 0;
    if (fd < 0)
        return -errno;
    buf = xf_malloc(DIR_BUF);
    while ((got = syscall(SYS_getdents64, fd, buf, DIR_BUF)) > 0) {
        for (long off = 0; off < got;) {
            const struct linux_dirent64 *e = (const void *)(buf + off);
            off += e->d_reclen;
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                xf_ptrvec_add(&v, xf_strdup(e->d_name));
        }
    }
    if (got < 0)
        err = errno;
    close(fd);
    free(buf);
    if (err != 0)
        return -err;
    if (v.n > 0)
        qsort(v.v, v.n, sizeof(*v.v), xf_strcmp_ptr);
    *names = (char **)v.v;
    *n = v.n;
    return 0;
}

/* see files.h */
int xf_list_dir(const char *d, char ***names, size_t *n)
{
    struct seen *e = find(listed, d);

    if (e == NULL) {
        e = remember(&listed, d);
        e->rv = list_dir(d, &e->names, &e->n);
    }
    *names = e->names;
    *n = e->n;
    return e->rv;
}

/* Opened O_NONBLOCK so that a FIFO cannot block the open
 * itself (a device is no spec either). */
static int read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rv, err;

    if (fd < 0 && errno == ENOENT)
        return RD_ABSENT;
    if (fd < 0) {
        xf_say(XF_ERR, "%s", strerror(errno));
        return RD_UNREADABLE;
    }
    if (fstat(fd, st) != 0 || S_ISDIR(st->st_mode)) {
        xf_say(XF_ERR, "%s", strerror(S_ISDIR(st->st_mode) ? EISDIR : errno));
        close(fd);
        return RD_UNREADABLE;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        xf_say(XF_ERR, "not a regular file");
        return RD_REFUSED;
    }
    rv = xf_read_fd_stat(fd, st, limit, data, len);
    err = errno;
    close(fd);
    if (rv != XF_OK && *len > limit) {
        xf_say(XF_ERR, "larger than the %zu-byte limit", limit);
        return RD_REFUSED;
    }
    if (rv != XF_OK) {
        xf_say(XF_ERR, "%s", strerror(err));
        return RD_UNREADABLE;
    }
    return RD_OK;
}

/* See files.h.  Read once with the largest limit asked (the callers ask for
 * few different limits): a later, smaller limit is checked on what was read. */
int xf_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
{
    struct seen *e = find(read_files, path);

    if (e == NULL || (e->rv == RD_REFUSED && S_ISREG(e->st.st_mode) && e->len > 0 && limit > e->len)) {
        e = e != NULL ? e : remember(&read_files, path);
        e->rv = read_regular(path, limit, &e->data, &e->len, &e->st);
        e->reason = e->rv == RD_UNREADABLE || e->rv == RD_REFUSED ? xf_strdup(xf_reason) : NULL;
    }
    *st = e->st;
    *data = e->data;
    *len = e->len;
    if (e->rv == RD_OK && e->len > limit) {
        xf_say(XF_ERR, "larger than the %zu-byte limit", limit);
        return RD_REFUSED;
    }
    if (e->reason != NULL)
        xf_say(XF_ERR, "%s", e->reason);
    return e->rv;
}
