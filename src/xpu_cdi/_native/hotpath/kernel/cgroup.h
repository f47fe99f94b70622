/* The container's device cgroup, the system calls (cgroup.c): opening its
 * directory, the usual layout found without mountinfo, devices.allow
 * writes.  hook/prestart/cgroup.h decides and words; here 0 (or an fd) or
 * -errno. */
#ifndef XF_KERNEL_CGROUP_H
#define XF_KERNEL_CGROUP_H
#include <stddef.h>

/* The directory of a device cgroup, as the rules need it (v2: readable, as
 * bpf(2) refuses O_PATH; v1: O_PATH for *at() calls): fd or -errno. */
int xc_cgroup_open(const char *path, int version);

/* The usual layout, without mountinfo: cgroup2 on /sys/fs/cgroup (runc's
 * statfs test) at v2path, else the v1 devices hierarchy on
 * /sys/fs/cgroup/devices at devpath (either NULL: not in one), taken only
 * when the directory lists pid in cgroup.procs.  Its fd with *version and
 * *path, or -ENOENT when the layout is another (mountinfo decides then). */
int xc_cgroup_usual(int pid, const char *v2path, const char *devpath, int *version, const char **path);

/* Each of the n devices.allow lines in its own write(2) (the kernel applies
 * only the first rule of a write), through one open file.  0, or -errno
 * with *failed the index of the line refused. */
int xc_devices_allow(int cgfd, const char *const *lines, size_t n, size_t *failed);

#endif
