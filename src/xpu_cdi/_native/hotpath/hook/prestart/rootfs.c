/* The container's rootfs (rootfs.h): creation below it through the
 * in-root walk (kernel/inroot.h), journalled. */
#include "hook/prestart/rootfs.h"
#include "kernel/bpf_dev.h"
#include "kernel/inroot.h"
#include "kernel/ns.h"
#include "kernel/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A container path that names something below the root:
 * absolute, no "." / ".." component, at least one component, < PATH_MAX. */
int xf_good_cpath(const char *p)
{
    int parts = 0;

    if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX)
        return 0;
    for (size_t len; (p = xf_component(p, &len)), len > 0; p += len) {
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        parts++;
    }
    return parts > 0;
}

const char *xf_fd_path(char buf[32], int fd)
{
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
    return buf;
}

static int undo_unlink(const long *a)
{
    return unlinkat((int)a[0], (const char *)(intptr_t)a[1], (int)a[2]) == 0 ? 0 : -errno;
}

/* Journal the removal of name (just made in dirfd): a dup of dirfd is
 * kept for the undo step.  If even that fails, remove it now. */
int xf_journal_unlink(struct xf_root *x, int dirfd, const char *name, int flags, const char *what)
{
    int keep = xf_undo_keeps(&x->undo, dirfd) ? dirfd : fcntl(dirfd, F_DUPFD_CLOEXEC, 3);

    if (keep < 0) {
        int err = errno;
        if (unlinkat(dirfd, name, flags) != 0)
            x->leaked = xf_printf("%s (cannot be journalled: %s)", what, strerror(err));
        return -err;
    }
    if (keep != dirfd)
        xf_undo_keep_fd(&x->undo, keep);
    xf_undo_push(&x->undo, what, undo_unlink, keep, (long)(intptr_t)xf_strdup(name), flags, 0);
    return 0;
}

/* Make name in dirfd with the fs ids of the container's
 * root when in a user namespace.  0 (XF_MK_FILE: the open fd) or -errno. */
int xf_create_as_owner(struct xf_root *x, enum xf_mk what, int dirfd, const char *name, mode_t mode, dev_t dev,
                       const char *target)
{
    int rv, err;

    if (x->userns && (rv = xc_setfsids(x->owner_uid, x->owner_gid)) != 0)
        return rv;
    switch (what) {
    case XF_MK_DIR:
        rv = mkdirat(dirfd, name, mode);
        break;
    case XF_MK_FILE:
        rv = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        break;
    case XF_MK_NODE:
        rv = mknodat(dirfd, name, mode, dev);
        break;
    default:
        rv = symlinkat(target, dirfd, name);
        break;
    }
    err = errno;
    if (x->userns && xc_setfsids(x->euid, x->egid) != 0)
        x->fsids_lost = 1;
    return rv < 0 ? -err : rv;
}

/* A missing component of cpath, made in dirfd.  A file made is closed, or
 * with keep not NULL, its fd is handed there (-1 for a directory). */
static int create_missing(struct xf_root *x, int dirfd, const char *name, int last, char leaf, const char *cpath,
                          int *keep)
{
    int rv, fd;

    if (keep != NULL)
        *keep = -1;
    if (last && leaf == 'f') {
        fd = xf_create_as_owner(x, XF_MK_FILE, dirfd, name, 0644, 0, NULL);
        if (fd < 0)
            return fd;
        rv = xf_journal_unlink(x, dirfd, name, 0, xf_printf("remove file '%s' made for '%s'", name, cpath));
        if (keep != NULL && rv == 0 && !x->fsids_lost)
            *keep = fd;
        else
            close(fd);
    } else {
        rv = xf_create_as_owner(x, XF_MK_DIR, dirfd, name, 0755, 0, NULL);
        if (rv < 0)
            return rv;
        rv = xf_journal_unlink(x, dirfd, name, AT_REMOVEDIR,
                               xf_printf("remove directory '%s' made for '%s'", name, cpath));
    }
    return x->fsids_lost ? -EPERM : rv;
}

/* The walk's creator for ensure (the one above, bound to one cpath). */
struct creating {
    struct xf_root *x;
    const char *cpath;
    char leaf;
};

static int create_cb(void *ctx, int dirfd, const char *name, int last)
{
    struct creating *c = ctx;

    return create_missing(c->x, dirfd, name, last, c->leaf, c->cpath, NULL);
}

/* cpath is missing but its parent resolves: make the last component there
 * (cpath a good path, so it has one), then open what was made, never
 * through a link.  -ENOENT when the parent is missing too (ensure then
 * makes it first), -EEXIST when the name exists after all (a dangling
 * symlink: the walk decides). */
static int make_leaf(struct xf_root *x, const char *cpath, char leaf, int *fd_out)
{
    const char *slash = strrchr(cpath, '/'), *name = slash + 1;
    char *parent = slash == cpath ? xf_strdup("/") : xf_strndup(cpath, (size_t)(slash - cpath));
    int pfd, rv;

    if (*name == '\0')
        return -EINVAL;
    if (xf_ensure_stat(x, parent, 'd', &pfd, NULL) != XF_OK)
        return -ENOENT;
    xf_undo_keep_fd(&x->undo, pfd); /* the journal's dirfd for the removal below */
    if ((rv = create_missing(x, pfd, name, 1, leaf, cpath, fd_out)) != 0 || *fd_out >= 0)
        return rv; /* a file is the fd it was made with */
    *fd_out = openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC); /* the kernel checks the type */
    return *fd_out < 0 ? -errno : 0;
}

/* An O_PATH fd of cpath, creating what is missing (dirs
 * 0755, a last component 'd' a dir or 'f' an empty 0644 file); an
 * existing last component of the wrong kind is an error.  *st_out (unless
 * NULL) gets its fstat. */
int xf_ensure_stat(struct xf_root *x, const char *cpath, char leaf, int *fd_out, struct stat *st_out)
{
    struct stat st;
    int fd, rv;

    /* a directory whose stat is not wanted: the kernel checks the type (not
     * one: resolved again below, for the message) */
    if (leaf == 'd' && st_out == NULL) {
        if ((rv = xc_resolve_in_root(x->rootfd, cpath, XC_RESOLVE_DIRECTORY, &fd)) == 0) {
            *fd_out = fd;
            return XF_OK;
        }
        if (rv == -ENOTDIR)
            rv = xc_resolve_in_root(x->rootfd, cpath, 0, &fd);
    } else {
        rv = xc_resolve_in_root(x->rootfd, cpath, 0, &fd);
    }
    /* missing: made in its resolved parent, or, when that cannot be (a
     * parent missing too, a dangling link), by the walk with create, made
     * relative to each resolved parent */
    if (rv == -ENOENT) {
        if ((rv = make_leaf(x, cpath, leaf, &fd)) == 0 && leaf == 'd' && st_out == NULL) {
            *fd_out = fd; /* a directory, opened O_DIRECTORY */
            return XF_OK;
        }
        if (rv != 0 && !x->fsids_lost) {
            struct creating c = {x, cpath, leaf};
            rv = xc_walk_in_root(x->rootfd, cpath, 0, create_cb, &c, &fd);
        }
    }
    if (rv != 0)
        return xf_say(XF_ERR, "resolve %s in the rootfs: %s", cpath, strerror(-rv));
    if (fstat(fd, &st) != 0) {
        rv = errno;
        close(fd);
        return xf_say(XF_ERR, "fstat %s: %s", cpath, strerror(rv));
    }
    if ((S_ISDIR(st.st_mode) != 0) != (leaf == 'd') || S_ISLNK(st.st_mode)) { /* a link: swapped in since made */
        close(fd);
        return xf_say(XF_ERR, "container path %s exists in the image but is not %s", cpath,
                      leaf == 'd' ? "a directory" : "a file (the source is a file)");
    }
    if (st_out != NULL)
        *st_out = st;
    *fd_out = fd;
    return XF_OK;
}

int xf_ensure(struct xf_root *x, const char *cpath, char leaf, int *fd_out)
{
    return xf_ensure_stat(x, cpath, leaf, fd_out, NULL);
}

/* (fd of the parent directory, made if missing; last
 * component) of an xf_good_cpath() path. */
int xf_parent_of(struct xf_root *x, const char *cpath, int *fd_out, const char **name)
{
    struct xf_buf parent = {0};
    const char *s = cpath, *last = NULL;
    size_t lastlen = 0;
    int rv;

    xf_buf_add(&parent, "", 0);
    while (*s) {
        size_t len;
        while (*s == '/')
            s++;
        len = strcspn(s, "/");
        if (len == 0)
            break;
        if (last != NULL) {
            xf_buf_add(&parent, "/", 1);
            xf_buf_add(&parent, last, lastlen);
        }
        last = s;
        lastlen = len;
        s += len;
    }
    if (last == NULL)
        return xf_say(XF_ERR, "container path %s names the root itself", cpath);
    if (parent.len == 0)
        xf_buf_add(&parent, "/", 1);
    *name = xf_strndup(last, lastlen);
    if (x->parent_path != NULL && strcmp(x->parent_path, parent.data) == 0) {
        *fd_out = x->parent_fd;
        return XF_OK;
    }
    if ((rv = xf_ensure(x, parent.data, 'd', fd_out)) != XF_OK)
        return rv;
    x->parent_path = parent.data;
    x->parent_fd = xf_undo_keep_fd(&x->undo, *fd_out);
    return XF_OK;
}
