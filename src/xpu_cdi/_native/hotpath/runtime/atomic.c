/* See atomic.h. */
#include "runtime/atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_MARK ".xpu-cdi-tmp"                  /* marks our temp files */

/* ---- atomic.write_atomic(durable=False) ------------------------------ */

int xf_write_atomic(const char *path, const char *data, size_t len, unsigned mode)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    char *tmp = xf_printf("%.*s.%s.%ld" TMP_MARK, (int)dirlen, path, path + dirlen, (long)getpid());
    int fd, rv;
    size_t done = 0;

    /* O_EXCL: never write through a file we did not create (a temp file
     * of a killed writer with our pid: refused, it is not ours) */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
    if (fd < 0)
        return xf_say(XF_ERR, "cannot write '%s': cannot create '%s': %s", path, tmp, strerror(errno));
    if (fchmod(fd, mode & 07777) != 0) /* O_CREAT's mode went through the umask */
        goto fail;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto fail;
        if (w == 0) {
            errno = EIO;
            goto fail;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    return XF_OK;
fail:
    rv = xf_say(XF_ERR, "cannot write '%s' (through '%s'): %s", path, tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rv;
}
