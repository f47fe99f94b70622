/* Device nodes and bind mounts placed in the container's rootfs, each
 * journalled for the undo (place.h). */
#include "hook/prestart/place.h"
#include "kernel/inroot.h"
#include "kernel/ns.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int undo_umount(const long *a)
{
    char p[32];
    return xc_umount(xf_fd_path(p, (int)a[0]), MNT_DETACH);
}

/* O_PATH fd of a mount source (host path, links followed),
 * root-owned -- or, for a device node (node not NULL), owned by the uid and
 * gid the node is declared with (an HwHiAiUser node) -- and, unless a
 * device node, not group/other-writable. */
int open_source(const char *host, const struct xf_plan_node *node, int *fd_out, struct stat *st_out)
{
    int writable_ok = node != NULL;
    struct stat st;
    int fd = open(host, O_PATH | O_CLOEXEC), err;

    if (fd < 0)
        return xf_named(xf_say(XF_ERR, "mount source '%s': %s", host, strerror(errno)));
    if (fstat(fd, &st) != 0) {
        err = errno;
        close(fd);
        return xf_named(xf_say(XF_ERR, "mount source '%s': %s", host, strerror(err)));
    }
    if (st.st_uid != 0 && !(node != NULL && (long long)st.st_uid == node->uid && (long long)st.st_gid == node->gid)) {
        close(fd);
        return xf_named(xf_say(XF_ERR, "mount source '%s' is owned by uid %u, not root: refusing to expose it to "
                               "containers; fix its ownership or mode", host, (unsigned)st.st_uid));
    }
    if (!writable_ok && (st.st_mode & 022)) {
        close(fd);
        return xf_named(xf_say(XF_ERR, "mount source '%s' is group- or world-writable (mode 0o%o): refusing to "
                               "expose it to containers; fix its ownership or mode", host,
                               (unsigned)(st.st_mode & 07777)));
    }
    *st_out = st;
    *fd_out = fd;
    return XF_OK;
}

/* The MS_* per-mount flags of the mount src is on
 * (statvfs f_flag; ST_RDONLY..ST_NOEXEC, ST_NOATIME and ST_NODIRATIME share
 * the MS_* values, ST_RELATIME does not).  The spec's atime options are
 * ignored, so the atime flags passed are the source's, which is what the
 * kernel keeps anyway. */
static int source_flags(int src, unsigned long *out)
{
    static const struct {
        unsigned long st, ms;
    } map[] = {{ST_RDONLY, MS_RDONLY},   {ST_NOSUID, MS_NOSUID},         {ST_NODEV, MS_NODEV},
               {ST_NOEXEC, MS_NOEXEC},   {ST_NOATIME, MS_NOATIME},       {ST_NODIRATIME, MS_NODIRATIME},
               {ST_RELATIME, MS_RELATIME}};
    struct statvfs sv;

    if (fstatvfs(src, &sv) != 0)
        return xf_say(XF_ERR, "statvfs of the mount source: %s", strerror(errno));
    *out = 0;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (sv.f_flag & map[i].st)
            *out |= map[i].ms;
    return XF_OK;
}

/* An fd the injection is done with: kept to the end with the journal's
 * (closed once there, or left to the exit), while they are few; else
 * closed now. */
#define KEEP_FDS_MAX 256
static void done_with(struct xf_root *x, int fd)
{
    if (x->undo.nfds < KEEP_FDS_MAX)
        xf_undo_keep_fd(&x->undo, fd);
    else
        close(fd);
}

/* bind_at's work; the caller is done with src afterwards. */
static int bind_src(struct xf_root *x, int src, const struct stat *srcst, const char *cpath, char leaf,
                    unsigned long flags, int recursive, int *made)
{
    struct stat a, b = *srcst;
    char sp[32], tp[32];
    int target, top, rv;

    *made = 0;
    if ((rv = xf_ensure_stat(x, cpath, leaf, &target, &a)) != XF_OK)
        return rv;
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        done_with(x, target);
        return XF_OK;
    }
    rv = xc_mount(xf_fd_path(sp, src), xf_fd_path(tp, target), NULL, MS_BIND | (recursive ? MS_REC : 0), NULL);
    done_with(x, target);
    x->parent_path = NULL; /* the mount may cover a parent resolved before */
    if (rv != 0)
        return xf_say(XF_ERR, "mount: %s", strerror(-rv));
    /* the O_PATH fd we mounted on names the covered inode: resolve again
     * to reach the new mount, and check it is what we bound */
    rv = xc_resolve_in_root(x->rootfd, cpath, 0, &top);
    if (rv != 0) {
        x->leaked = xf_printf("the bind mount on '%s' (cannot find it again: %s)", cpath, strerror(-rv));
        return xf_say(XF_ERR, "resolve %s after mounting: %s", cpath, strerror(-rv));
    }
    /* journal the unmount only of what is our mount: unmounting whatever
     * a raced path leads to could take down a mount the runtime made */
    if (fstat(top, &a) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(top);
        x->leaked = xf_printf("the bind mount on '%s' (not where it was made)", cpath);
        return xf_say(XF_ERR, "the bind mount is not where it was made (raced?)");
    }
    xf_undo_keep_fd(&x->undo, top);
    xf_undo_push(&x->undo, xf_printf("unmount '%s'", cpath), undo_umount, top, 0, 0, 0);
    if (flags) {
        /* a bind remount replaces the mount's flags: keep those the
         * source's mount has (a nosuid/noexec/ro host filesystem stays so
         * in the container), which in a user namespace the kernel also
         * demands (it refuses to clear flags locked when the namespace was
         * made) */
        unsigned long have = 0;
        if ((rv = source_flags(src, &have)) != XF_OK)
            return rv;
        if ((rv = xc_mount(NULL, xf_fd_path(tp, top), NULL, MS_REMOUNT | MS_BIND | flags | have, NULL)) != 0)
            return xf_say(XF_ERR, "remount: %s", strerror(-rv));
    }
    *made = 1;
    return XF_OK;
}

/* Bind src onto cpath (made as leaf 'd'/'f' if missing), then
 * remount with flags.  *made 0 when cpath already shows src. */
int bind_at(struct xf_root *x, int src, const struct stat *srcst, const char *cpath, char leaf,
            unsigned long flags, int recursive, int *made)
{
    int rv = bind_src(x, src, srcst, cpath, leaf, flags, recursive, made);

    done_with(x, src);
    return rv;
}

/* mknod (as the container's root owns it), or bind the host
 * node (user namespace, or mknod refused); *how "mknod" / "bind" / "exists". */
int make_node(struct xf_root *x, const struct xf_plan_node *n, int bind, const char **how)
{
    dev_t rdev = makedev(n->major, n->minor);
    mode_t fmt = n->kind == 'b' ? S_IFBLK : S_IFCHR;
    struct stat st;
    int parent, src, rv, made;
    const char *name;

    if (!bind) {
        if ((rv = xf_parent_of(x, n->path, &parent, &name)) != XF_OK)
            return rv;
        rv = xf_create_as_owner(x, XF_MK_NODE, parent, name, fmt | n->mode, rdev, NULL);
        if (rv == -EEXIST) {
            if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rv = errno;
                return xf_say(XF_ERR, "stat: %s", strerror(rv));
            }
            if ((st.st_mode & S_IFMT) == fmt && st.st_rdev == rdev) {
                *how = "exists";
                return x->fsids_lost ? xf_say(XF_ERR, "cannot restore the filesystem ids") : XF_OK;
            }
            return xf_named(xf_say(XF_ERR, "device node '%s' already exists in the container and is not %c %u:%u",
                                   n->path, n->kind, n->major, n->minor));
        }
        if (rv == -EPERM || rv == -EACCES) { /* e.g. a user namespace: bind the host node instead */
            if (x->fsids_lost)
                return xf_say(XF_ERR, "cannot restore the filesystem ids");
            bind = 1;
        } else if (rv != 0) {
            return xf_say(XF_ERR, "mknod: %s", strerror(-rv));
        } else {
            rv = xf_journal_unlink(x, parent, name, 0, xf_strcat3("remove node '", n->path, "'"));
            if (rv == 0 && x->fsids_lost)
                rv = -EPERM;
            if (rv == 0 && n->chown &&
                fchownat(parent, name, (uid_t)n->uid, (gid_t)n->gid, AT_SYMLINK_NOFOLLOW) != 0)
                rv = -errno;
            if (rv != 0)
                return xf_say(XF_ERR, "%s", strerror(-rv));
            *how = "mknod";
            return XF_OK;
        }
    }
    if ((rv = open_source(n->host, n, &src, &st)) != XF_OK)
        return rv;
    if ((st.st_mode & S_IFMT) != fmt || st.st_rdev != rdev) {
        close(src);
        return xf_say(XF_ERR, "host node %s is not %c %u:%u", n->host, n->kind, n->major, n->minor);
    }
    rv = bind_at(x, src, &st, n->path, 'f', MS_NOSUID, 0, &made);
    *how = "bind";
    return rv;
}
