/* Device access in the container's cgroup (cgroup.c): found as runc decides
 * (lib/cgroup_locate.h), opened and given the rules through kernel/cgroup.h
 * and kernel/bpf_dev.h; the v1 devices controller when the container is in
 * one, else cgroup2's device programs. */
#ifndef XF_CGROUP_H
#define XF_CGROUP_H
#include "hook/prestart/undo.h"

struct xf_rule {
    char type;          /* 'c' or 'b' ('u' is given as 'c'; fifos need no rule) */
    long long major, minor;
    char access[4];     /* subset of "rwm" in that order, NUL-terminated */
};

struct xf_cgroup {
    int version;        /* 1 or 2 */
    const char *path;   /* the device cgroup directory (runtime mount namespace) */
    int fd;             /* v1: O_PATH dir fd; v2: O_RDONLY dir fd (bpf needs it) */
};

/* Find and open the device cgroup of host pid (reads /proc/PID/cgroup and
 * /proc/self/mountinfo; call before joining the container's mount
 * namespace).  XF_OK, or XF_ERR with the reason. */
int xf_cgroup_open(int pid, struct xf_cgroup *out);

/* Allow the rules: v1 one write(2) per rule to devices.allow (no undo: the
 * runtime removes the cgroup of a container that fails to start); v2
 * replace every attached device program with one that also allows them
 * (xc_bpf_dev_patch; each replacement journalled in undo so it
 * can be put back).  *replaced gets the number of programs replaced.
 * XF_OK, or XF_ERR with the reason (nothing of this call left applied
 * for v2 beyond what undo restores). */
int xf_cgroup_allow(const struct xf_cgroup *cg, const struct xf_rule *rules, size_t n,
                    struct xf_undo *undo, int *replaced);

void xf_cgroup_close(struct xf_cgroup *cg);

#endif
