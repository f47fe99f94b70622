/* Resolving a path below a rootfs fd without leaving it (inroot.c):
 * absolute symlinks restart at the root, ".." stops there, more than 40
 * links is ELOOP.  0 or -errno; fds O_PATH|O_CLOEXEC. */
#ifndef XF_INROOT_H
#define XF_INROOT_H

#define XC_RESOLVE_NO_OPENAT2 1 /* force the manual walk */
#define XC_RESOLVE_NOFOLLOW 2   /* do not follow a symlink in the last component */
#define XC_RESOLVE_DIRECTORY 4  /* the last component must be a directory (else -ENOTDIR) */

int xc_resolve_in_root(int rootfd, const char *path, int flags, int *fd_out);
/* The walk behind xc_resolve_in_root (flags: XC_RESOLVE_NOFOLLOW), with an
 * optional create(ctx, parent dirfd, name, is_last) -> 0 or -errno for a
 * missing component, which is then opened again. */
int xc_walk_in_root(int rootfd, const char *path, int flags,
                    int (*create)(void *ctx, int dirfd, const char *name, int last), void *ctx,
                    int *fd_out);

#endif
