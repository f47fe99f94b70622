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

#define MAX_MAP_BYTES 65536

/* same_ns: 1 same, 0 different, -1 unreadable (reason set). */
int same_ns(int pid, const char *name)
{
    char mine[64], theirs[64];
    struct stat a, b;

    snprintf(mine, sizeof(mine), "/proc/self/ns/%s", name);
    snprintf(theirs, sizeof(theirs), "/proc/%d/ns/%s", pid, name);
    if (stat(mine, &a) != 0 || stat(theirs, &b) != 0) {
        xf_say(XF_ERR, "container process %d: cannot read its %s namespace: %s", pid, name, strerror(errno));
        return -1;
    }
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* _root_owner, one map: the host id that is 0 in the user namespace of pid. */
int root_owner(int pid, const char *kind, unsigned *out)
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

/* open_namespaces: the namespaces of pid that differ from ours, for ldconfig. */
int open_namespaces(int pid, int *fds, int *types, size_t *n)
{
    static const struct {
        const char *name;
        int type;
    } ns[] = {{"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}, {"net", CLONE_NEWNET},
              {"cgroup", CLONE_NEWCGROUP}, {"pid", CLONE_NEWPID}, {"user", CLONE_NEWUSER}};
    char path[64];
    struct stat st;

    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        int same, fd;
        snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, ns[i].name);
        if (stat(path, &st) != 0)
            continue;
        if ((same = same_ns(pid, ns[i].name)) < 0)
            return XF_ERR;
        if (same)
            continue;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return xf_say(XF_ERR, "%s: %s", path, strerror(errno));
        fds[*n] = fd;
        types[(*n)++] = ns[i].type;
    }
    return XF_OK;
}
