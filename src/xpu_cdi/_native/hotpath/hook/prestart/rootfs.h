/* The container's rootfs, seen from its mount namespace.
 *
 * Security: the image may be hostile.  Every container path is resolved
 * below an O_PATH fd of the rootfs (xc_resolve_in_root; the creating walk
 * has the same rules: absolute symlinks restart at the root, ".." stops
 * there, > 40 links is ELOOP), and every creation is an *at() call
 * relative to a resolved parent, made as the container's root in a user
 * namespace (as_owner) and journalled for the undo. */
#ifndef XF_ROOTFS_H
#define XF_ROOTFS_H
#include "hook/prestart/undo.h"

#include <sys/stat.h>
#include <sys/types.h>

struct xf_root {
    int rootfd;                /* O_PATH of the rootfs (container's mount namespace) */
    struct xf_undo undo;
    int userns;                /* create as the container's root (as_owner) */
    unsigned owner_uid, owner_gid, euid, egid;
    int fsids_lost;            /* the fs ids could not be switched back: stop */
    const char *leaked;        /* a change made that the journal cannot take back */
    const char *parent_path;   /* the last parent xf_parent_of resolved (NULL: none, or a mount was */
    int parent_fd;             /* made since), and its fd, which the journal keeps */
};

/* A container path that names something below the root:
 * absolute, no "." / ".." component, at least one component, < PATH_MAX. */
int xf_good_cpath(const char *p);

/* "/proc/self/fd/N" in buf, to mount onto or from a resolved fd. */
const char *xf_fd_path(char buf[32], int fd);

/* Journal the removal of name (just made in dirfd): a dup of dirfd is
 * kept for the undo step (dirfd itself when the journal keeps it already).
 * If even that fails, remove it now (or set x->leaked).  0 or -errno. */
int xf_journal_unlink(struct xf_root *x, int dirfd, const char *name, int flags, const char *what);

enum xf_mk { XF_MK_DIR, XF_MK_FILE, XF_MK_NODE, XF_MK_LINK };

/* Make name in dirfd with the fs ids of the container's
 * root when in a user namespace (mode for dir/file/node, dev for a node,
 * target for a link).  0 (XF_MK_FILE: the open fd) or -errno; check
 * x->fsids_lost afterwards. */
int xf_create_as_owner(struct xf_root *x, enum xf_mk what, int dirfd, const char *name, mode_t mode, dev_t dev,
                       const char *target);

/* An O_PATH fd of cpath, creating what is missing (dirs
 * 0755, a last component 'd' a dir or 'f' an empty 0644 file); an
 * existing last component of the wrong kind is an error.  XF_OK or
 * XF_ERR (reason set). */
int xf_ensure(struct xf_root *x, const char *cpath, char leaf, int *fd_out);
int xf_ensure_stat(struct xf_root *x, const char *cpath, char leaf, int *fd_out, struct stat *st_out);

/* (fd of the parent directory, made if missing; last component) of an
 * xf_good_cpath() path.  The fd is the journal's (kept until the end of
 * the injection, never closed by the caller), and the same for the same
 * parent until a mount is made: nodes in /dev resolve /dev once.  XF_OK
 * or XF_ERR. */
int xf_parent_of(struct xf_root *x, const char *cpath, int *fd_out, const char **name);

#endif
