/* See files.h. */
#include "lib/files.h"
#include "lib/collections.h"
#include "lib/common.h"
#include "lib/strings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* see files.h */
int rq_list_dir(const char *d, char ***names, size_t *n)
{
    DIR *dir = opendir(d);
    struct dirent *e;
    struct rq_vec v = {0};

    *names = NULL;
    *n = 0;
    if (dir == NULL)
        return -errno;
    for (;;) {
        errno = 0;
        e = readdir(dir);
        if (e == NULL)
            break;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        rq_vec_add(&v, xf_strdup(e->d_name));
    }
    if (errno != 0) {
        int err = errno;
        closedir(dir);
        return -err;
    }
    closedir(dir);
    if (v.n > 0)
        qsort(v.v, v.n, sizeof(*v.v), rq_cmp_str);
    *names = (char **)v.v;
    *n = v.n;
    return 0;
}

/* Up to limit bytes of a regular file (NUL-terminated).  RD_UNREADABLE when
 * open(2) or read(2) fails (a directory too: EISDIR); RD_REFUSED (reason
 * set) for a file larger than limit or of another type (a FIFO would block
 * the reader, a device is no spec).  Opened O_NONBLOCK so that a FIFO
 * cannot block the open itself. */
int rq_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct xf_buf b = {0};
    int rv = RD_OK;

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
    xf_buf_add(&b, "", 0);
    for (;;) {
        char chunk[65536];
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            xf_say(XF_ERR, "%s", strerror(errno));
            rv = RD_UNREADABLE;
            break;
        }
        if (got == 0)
            break;
        if (b.len + (size_t)got > limit) {
            xf_say(XF_ERR, "larger than the %zu-byte limit", limit);
            rv = RD_REFUSED;
            break;
        }
        xf_buf_add(&b, chunk, (size_t)got);
    }
    close(fd);
    if (rv != RD_OK) {
        free(b.data);
        return rv;
    }
    *data = b.data;
    *len = b.len;
    return RD_OK;
}
