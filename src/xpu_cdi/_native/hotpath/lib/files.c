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
int xf_list_dir(const char *d, char ***names, size_t *n)
{
    DIR *dir = opendir(d);
    struct dirent *e;
    struct xf_ptrvec v = {0};

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
        xf_ptrvec_add(&v, xf_strdup(e->d_name));
    }
    if (errno != 0) {
        int err = errno;
        closedir(dir);
        return -err;
    }
    closedir(dir);
    if (v.n > 0)
        qsort(v.v, v.n, sizeof(*v.v), xf_strcmp_ptr);
    *names = (char **)v.v;
    *n = v.n;
    return 0;
}

/* See files.h.  Opened O_NONBLOCK so that a FIFO cannot block the open
 * itself (a device is no spec either). */
int xf_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
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
    rv = xf_read_fd(fd, limit, data, len);
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
