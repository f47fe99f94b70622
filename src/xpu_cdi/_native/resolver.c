/* The C half of xpu-cdi's resolver: batch device-node stat and sysfs
 * lookups for `generate`.  Kept in C because generate may resolve thousands
 * of nodes and a Python os.stat loop pays for a stat_result object and
 * attribute lookups per node; here a whole batch is one call.
 *
 * Every function returns 0 or -errno and never allocates memory the caller
 * must free. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#define XC_NODE_FIELDS 7

static char type_of(mode_t m)
{
    if (S_ISCHR(m)) return 'c';
    if (S_ISBLK(m)) return 'b';
    if (S_ISREG(m)) return '-';
    if (S_ISDIR(m)) return 'd';
    return '?';
}

/* Paths of one batch usually share a directory (/dev): stat them relative
 * to a cached directory fd so the kernel walks the prefix once. */
int xc_stat_nodes(const char *paths, size_t n, long long *out)
{
    char dir[PATH_MAX];
    size_t dirlen = 0;
    int dirfd = -1;
    const char *p = paths;

    dir[0] = '\0';
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1) {
        long long *o = out + i * XC_NODE_FIELDS;
        struct stat st;
        const char *slash = strrchr(p, '/');
        int rv;

        memset(o, 0, sizeof(long long) * XC_NODE_FIELDS);
        if (slash != NULL && slash != p && (size_t)(slash - p) < sizeof(dir)) {
            size_t len = (size_t)(slash - p);
            if (dirfd < 0 || len != dirlen || memcmp(dir, p, len) != 0) {
                if (dirfd >= 0) close(dirfd);
                memcpy(dir, p, len);
                dir[len] = '\0';
                dirlen = len;
                dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
            }
            rv = dirfd >= 0 ? fstatat(dirfd, slash + 1, &st, 0) : stat(p, &st);
        } else {
            rv = stat(p, &st);
        }
        if (rv != 0) {
            o[0] = errno;
            continue;
        }
        o[1] = type_of(st.st_mode);
        o[2] = major(st.st_rdev);
        o[3] = minor(st.st_rdev);
        o[4] = st.st_mode & 07777;
        o[5] = st.st_uid;
        o[6] = st.st_gid;
    }
    if (dirfd >= 0) close(dirfd);
    return 0;
}

static int is_pci_address(const char *s)
{
    /* dddd:bb:dd.f, hex digits */
    static const char shape[] = "xxxx:xx:xx.x";
    if (strlen(s) != sizeof(shape) - 1) return 0;
    for (size_t i = 0; shape[i]; i++) {
        if (shape[i] == 'x') {
            char c = s[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                return 0;
        } else if (s[i] != shape[i]) {
            return 0;
        }
    }
    return 1;
}

int xc_pci_of(const char *sysfs_root, unsigned int maj, unsigned int min,
              char *pci, size_t pci_len, int *numa)
{
    char link[PATH_MAX], real[PATH_MAX], numa_path[PATH_MAX + 16], buf[32];
    const char *root = strcmp(sysfs_root, "/") == 0 ? "" : sysfs_root;
    const char *base;
    FILE *f;

    if (pci_len) pci[0] = '\0';
    *numa = -1;
    if (snprintf(link, sizeof(link), "%s/sys/dev/char/%u:%u/device", root, maj, min)
        >= (int)sizeof(link))
        return -ENAMETOOLONG;
    if (realpath(link, real) == NULL)
        return -errno;
    base = strrchr(real, '/');
    base = base ? base + 1 : real;
    if (!is_pci_address(base))
        return 0;
    if (strlen(base) + 1 > pci_len)
        return -ENAMETOOLONG;
    memcpy(pci, base, strlen(base) + 1);
    snprintf(numa_path, sizeof(numa_path), "%s/numa_node", real);
    f = fopen(numa_path, "re");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL) {
            char *end;
            long v = strtol(buf, &end, 10);
            if (end != buf && v >= 0 && v < INT_MAX) *numa = (int)v;
        }
        fclose(f);
    }
    return 0;
}
