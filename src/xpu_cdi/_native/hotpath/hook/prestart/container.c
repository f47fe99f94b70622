/* The container's namespaces seen from the hook: whether it has its own,
 * who owns its user namespace, fds to join for ldconfig (container.h). */
#include "hook/prestart/container.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MAP_BYTES 65536

int xf_nsdirs_open(int pid, struct xf_nsdirs *ns)
{
    char theirs[64];

    snprintf(theirs, sizeof(theirs), "/proc/%d/ns", pid);
    ns->self = open("/proc/self/ns", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ns->theirs = open(theirs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ns->self < 0 || ns->theirs < 0) {
        int err = errno;
        xf_nsdirs_close(ns);
        return xf_say(XF_ERR, "container process %d: cannot read its namespaces: %s (has it exited?)", pid,
                      strerror(err));
    }
    return XF_OK;
}

void xf_nsdirs_close(struct xf_nsdirs *ns)
{
    if (ns->self >= 0)
        close(ns->self);
    if (ns->theirs >= 0)
        close(ns->theirs);
    ns->self = ns->theirs = -1;
}

int xf_same_ns(const struct xf_nsdirs *ns, int pid, const char *name)
{
    struct stat a, b;

    if (fstatat(ns->self, name, &a, 0) != 0 || fstatat(ns->theirs, name, &b, 0) != 0) {
        xf_say(XF_ERR, "container process %d: cannot read its %s namespace: %s", pid, name, strerror(errno));
        return -1;
    }
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* One map: the host id that is 0 in the user namespace of pid. */
int xf_root_owner(int pid, const char *kind, unsigned *out)
{
    char path[64], *text, *line, *save = NULL;
    size_t len;

    snprintf(path, sizeof(path), "/proc/%d/%s_map", pid, kind);
    if (xf_read_file(path, MAX_MAP_BYTES, &text, &len, NULL) != XF_OK)
        return XF_ERR;
    if (strlen(text) != len)
        return xf_say(XF_ERR, "%s: NUL byte", path);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long long v[3];
        int used = 0;
        char *s = line, *end;
        for (int f = 0; f < 3; f++) {
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s < '0' || *s > '9')
                return xf_say(XF_ERR, "%s: unexpected line", path);
            errno = 0;
            v[f] = strtoull(s, &end, 10);
            if (errno != 0 || v[f] > 0xffffffffULL)
                return xf_say(XF_ERR, "%s: unexpected line", path);
            s = end;
            used++;
        }
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (*s != '\0' || used != 3)
            return xf_say(XF_ERR, "%s: unexpected line", path);
        if (v[0] == 0) {
            *out = (unsigned)v[1];
            return XF_OK;
        }
    }
    return xf_say(XF_ERR, "container process %d: %s 0 is not mapped in its user namespace", pid, kind);
}

int xf_open_namespaces(const struct xf_nsdirs *ns, int pid, int *fds, int *types, size_t *n)
{
    static const struct {
        const char *name;
        int type;
    } kinds[] = {{"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}, {"net", CLONE_NEWNET},
                 {"cgroup", CLONE_NEWCGROUP}, {"pid", CLONE_NEWPID}, {"user", CLONE_NEWUSER}};
    struct stat st;

    *n = 0;
    if (ns == NULL || ns->theirs < 0)
        return XF_OK;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        int same, fd;
        if (fstatat(ns->theirs, kinds[i].name, &st, 0) != 0)
            continue; /* a kernel without that kind */
        if ((same = xf_same_ns(ns, pid, kinds[i].name)) < 0)
            return XF_ERR;
        if (same)
            continue;
        fd = openat(ns->theirs, kinds[i].name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return xf_say(XF_ERR, "/proc/%d/ns/%s: %s", pid, kinds[i].name, strerror(errno));
        fds[*n] = fd;
        types[(*n)++] = kinds[i].type;
    }
    return XF_OK;
}
