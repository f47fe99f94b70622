/* See cgroup.h. */
#include "kernel/cgroup.h"
#include "lib/cgroup_locate.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define PROCS_LIMIT (1u << 20)

int xc_cgroup_open(const char *path, int version)
{
    int flags = version == 2 ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_PATH | O_DIRECTORY | O_CLOEXEC, fd;

    do
        fd = open(path, flags);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

/* Whether pid is listed in cgroup.procs of dirfd: the proof that dirfd is its cgroup. */
static int lists_pid(int dirfd, int pid)
{
    char *text, want[16];
    size_t len, n = (size_t)snprintf(want, sizeof(want), "%d", pid);
    int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC), rv;

    if (fd < 0)
        return 0;
    rv = xf_read_fd_stat(fd, NULL, PROCS_LIMIT, &text, &len); /* cgroupfs reports no size */
    close(fd);
    for (const char *line = text; rv == XF_OK && *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t ll = eol ? (size_t)(eol - line) : strlen(line);
        if (ll == n && memcmp(line, want, n) == 0)
            return 1;
        line += ll + (eol != NULL);
    }
    return 0;
}

int xc_cgroup_usual(int pid, const char *v2path, const char *devpath, int *version, const char **path)
{
    struct statfs sf;
    struct stat st;
    int fd;

    if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC && v2path != NULL) {
        *version = 2;
        *path = xf_cgroup_dir("/sys/fs/cgroup", "/", v2path);
    } else if (devpath != NULL && statfs("/sys/fs/cgroup/devices", &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC) {
        *version = 1;
        *path = xf_cgroup_dir("/sys/fs/cgroup/devices", "/", devpath);
    } else {
        return -ENOENT;
    }
    if ((fd = xc_cgroup_open(*path, *version)) < 0)
        return -ENOENT;
    if ((*version == 1 && fstatat(fd, "devices.allow", &st, 0) != 0) || !lists_pid(fd, pid)) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

static int write_all(int fd, const char *s, size_t n)
{
    ssize_t w;

    do
        w = write(fd, s, n);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -errno;
    return (size_t)w == n ? 0 : -EIO;
}

int xc_devices_allow(int cgfd, const char *const *lines, size_t n, size_t *failed)
{
    int fd, rv = 0;

    *failed = 0;
    if (n == 0)
        return 0;
    do
        fd = openat(cgfd, "devices.allow", O_WRONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    for (size_t i = 0; i < n && rv == 0; i++)
        if ((rv = write_all(fd, lines[i], strlen(lines[i]))) != 0)
            *failed = i;
    close(fd);
    return rv;
}
