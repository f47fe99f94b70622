/* The container's device cgroup found in the kernel's texts (cgroup_locate.c):
 * pure functions, no system call; the hook opens what they name. */
#ifndef XF_CGROUP_LOCATE_H
#define XF_CGROUP_LOCATE_H
#include "lib/common.h"

/* The device cgroup found in given texts (mountinfo, /proc/PID/cgroup, as
 * the kernel writes them; both NUL-terminated at their length): *version
 * 1 or 2 and the device cgroup directory, deciding as runc does.  XF_OK,
 * or XF_ERR with the reason (not found, or text the kernel would not have
 * written: a NUL byte, a backslash not starting an octal escape). */
int xf_cgroup_locate(const char *mountinfo, size_t mlen, const char *cgroups, size_t clen,
                     int *version, const char **path);

/* The cgroup2 path ("0::/path") and the v1 devices path ("7:devices:/path")
 * of a /proc/PID/cgroup text, each NULL when absent. */
void xf_proc_cgroups(const char *text, const char **v2, const char **devices);

/* The directory of cgroup path in a hierarchy mounted at mountpoint,
 * whose mount shows the hierarchy from root (mountinfo's root field). */
const char *xf_cgroup_dir(const char *mountpoint, const char *root, const char *path);

#endif
