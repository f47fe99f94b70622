/* Path resolution below a container's rootfs without ever leaving it
 * (inroot.h): openat2(RESOLVE_IN_ROOT), or a component-by-component walk. */
#define _GNU_SOURCE /* setns, O_PATH and the other Linux interfaces below */
#include "kernel/inroot.h"

#define XC_MAX_LINKS 40         /* as the kernel's MAXSYMLINKS */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Resolve path component by component below rootfd without ever leaving
 * it: an absolute symlink restarts at rootfd, ".." at rootfd stays there,
 * more than XC_MAX_LINKS links is ELOOP.  Every step is an
 * openat(O_PATH|O_NOFOLLOW) relative to the previous fd, so nothing
 * outside the root is ever looked up by name.  flags: XC_RESOLVE_NOFOLLOW
 * returns a symlink in the last component itself.  With create, a
 * component that does not exist (also behind a symlink) is made by
 * create(ctx, dirfd of its resolved parent, name, is_last) -- 0 or
 * -errno, which the walk returns -- and then opened again, so the walk
 * goes on through what was made.  The one walk behind both
 * xc_resolve_in_root and the hook's creations (hook/prestart/rootfs.c). */
int xc_walk_in_root(int rootfd, const char *path, int flags,
                    int (*create)(void *ctx, int dirfd, const char *name, int last), void *ctx,
                    int *fd_out)
{
    char buf[2 * PATH_MAX], tmp[2 * PATH_MAX], target[PATH_MAX], name[NAME_MAX + 1];
    struct stat rootst, st;
    int cur, nfd, err, links = 0;
    char *p;

    *fd_out = -1;
    if (strlen(path) >= sizeof(buf))
        return -ENAMETOOLONG;
    if (fstat(rootfd, &rootst) != 0)
        return -errno;
    cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    strcpy(buf, path);
    p = buf;
    for (;;) {
        size_t len;
        int last;
        ssize_t n;

        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        len = strcspn(p, "/");
        if (len > NAME_MAX) {
            err = ENAMETOOLONG;
            goto fail;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        last = p[strspn(p, "/")] == '\0';
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            if (fstat(cur, &st) != 0)
                goto fail_errno;
            if (same_inode(&st, &rootst))
                continue; /* ".." never climbs above the root */
            nfd = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (nfd < 0)
                goto fail_errno;
            close(cur);
            cur = nfd;
            continue;
        }
        nfd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            int rv = create(ctx, cur, name, last); /* relative to the resolved parent */
            if (rv != 0) {
                err = -rv;
                goto fail;
            }
            nfd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0)
            goto fail_errno;
        if (fstat(nfd, &st) != 0) {
            err = errno;
            close(nfd);
            goto fail;
        }
        if (S_ISLNK(st.st_mode) && !(last && (flags & XC_RESOLVE_NOFOLLOW))) {
            if (++links > XC_MAX_LINKS) {
                close(nfd);
                err = ELOOP;
                goto fail;
            }
            n = readlinkat(nfd, "", target, sizeof(target) - 1);
            err = errno;
            close(nfd);
            if (n < 0)
                goto fail;
            if ((size_t)n >= sizeof(target) - 1) {
                err = ENAMETOOLONG;
                goto fail;
            }
            target[n] = '\0';
            if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%s", target, p) >= sizeof(tmp)) {
                err = ENAMETOOLONG;
                goto fail;
            }
            strcpy(buf, tmp);
            p = buf;
            if (target[0] == '/') { /* absolute: restart at the root, not the host's / */
                nfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
                if (nfd < 0)
                    goto fail_errno;
                close(cur);
                cur = nfd;
            }
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode)) {
            close(nfd);
            err = ENOTDIR;
            goto fail;
        }
        close(cur);
        cur = nfd;
    }
    *fd_out = cur;
    return 0;
fail_errno:
    err = errno;
fail:
    close(cur);
    return -err;
}

int xc_resolve_in_root(int rootfd, const char *path, int flags, int *fd_out)
{
    struct stat st;
    int rv;

    *fd_out = -1;
    if (path[0] == '\0')
        path = "."; /* the root itself, as the walk answers */
    if (!(flags & XC_RESOLVE_NO_OPENAT2)) {
        struct open_how how;
        int tries;

        memset(&how, 0, sizeof(how));
        how.flags = O_PATH | O_CLOEXEC | ((flags & XC_RESOLVE_NOFOLLOW) ? O_NOFOLLOW : 0) |
                    ((flags & XC_RESOLVE_DIRECTORY) ? O_DIRECTORY : 0);
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        for (tries = 0; tries < 4; tries++) {
            int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
            if (fd >= 0) {
                *fd_out = fd;
                return 0;
            }
            if (errno != EAGAIN)
                break;
        }
        /* ENOSYS (kernel < 5.6), EPERM (a seccomp filter), E2BIG, or EAGAIN
         * under constant renames: the walk gives the same answer, slower. */
        if (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EAGAIN)
            return -errno;
    }
    rv = xc_walk_in_root(rootfd, path, flags & XC_RESOLVE_NOFOLLOW, NULL, NULL, fd_out);
    if (rv == 0 && (flags & XC_RESOLVE_DIRECTORY)) {
        if (fstat(*fd_out, &st) != 0)
            rv = -errno;
        else if (!S_ISDIR(st.st_mode))
            rv = -ENOTDIR;
        if (rv != 0) {
            close(*fd_out);
            *fd_out = -1;
        }
    }
    return rv;
}
