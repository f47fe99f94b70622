/* Device access in the container's cgroup (cgroup_locate.c finds and
 * opens it, cgroup_allow.c allows devices there), with the same version
 * decision as runc: the v1 devices controller when the container is in
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

/* The device cgroup found in given texts (mountinfo, /proc/PID/cgroup, as
 * the kernel writes them; both NUL-terminated at their length): *version
 * 1 or 2 and the device cgroup directory, deciding as runc does.  XF_OK,
 * or XF_ERR with the reason (not found, or text the kernel would not have
 * written: a NUL byte, a backslash not starting an octal escape). */
int xf_cgroup_locate(const char *mountinfo, size_t mlen, const char *cgroups, size_t clen,
                     int *version, const char **path);

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
