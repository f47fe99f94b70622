/* The container's namespaces seen from the hook (container.c). */
#ifndef XF_CONTAINER_H
#define XF_CONTAINER_H
#include "lib/common.h"

/* /proc/PID/ns of the container and the hook's own /proc/self/ns, opened
 * before joining its mount namespace (where /proc may be another procfs,
 * or none): namespaces are then compared and opened through these.  Each
 * first look-up of a /proc/PID/ns entry costs the kernel ~10 us, so only
 * what a step needs is looked at.  -1 when not opened (in place). */
struct xf_nsdirs {
    int self, theirs;
};

/* XF_OK, or XF_ERR (reason set: the process is gone). */
int xf_nsdirs_open(int pid, struct xf_nsdirs *ns);
void xf_nsdirs_close(struct xf_nsdirs *ns);
/* Whether the container's namespace *name* is ours: 1, 0, or -1 (reason set). */
int xf_same_ns(const struct xf_nsdirs *ns, int pid, const char *name);
/* The host id that is 0 in the user namespace of pid (kind "uid" or "gid"). */
int xf_root_owner(int pid, const char *kind, unsigned *out);
/* fds (and CLONE_NEW* types) of the container's namespaces that differ from
 * ours, for the image's ldconfig; none when ns is not opened.  XF_OK or XF_ERR. */
int xf_open_namespaces(const struct xf_nsdirs *ns, int pid, int *fds, int *types, size_t *n);

#endif
