/* Host device-node facts for the Python tooling (`generate`, the doctor, the device plugin): batch
 * device-node stat and the sysfs PCI lookup.  Kept in C because generate may resolve thousands
 * of nodes and a Python os.stat loop pays for a stat_result object and
 * attribute lookups per node; here a whole batch is one call.
 *
 * Every function returns 0 or -errno and never allocates memory the caller
 * must free (scratch memory is freed before returning). */
#ifndef _GNU_SOURCE /* Python.h has it already */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#define XC_NODE_FIELDS 6  /* errno, major, minor, mode, uid, gid */

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
static void stat_range(const char *const *starts, size_t n, size_t lo, size_t hi,
                       long long *out, char *types)
{
    char dir[PATH_MAX];
    size_t dirlen = 0;
    int dirfd = -1;

    for (size_t i = lo; i < hi; i++) {
        const char *p = starts[i];
        struct stat st;
        const char *slash = strrchr(p, '/');
        int rv;

        for (size_t f = 0; f < XC_NODE_FIELDS; f++)
            out[f * n + i] = 0;
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
            out[i] = errno;
            types[i] = '!';
            continue;
        }
        types[i] = type_of(st.st_mode);
        out[1 * n + i] = major(st.st_rdev);
        out[2 * n + i] = minor(st.st_rdev);
        out[3 * n + i] = st.st_mode & 07777;
        out[4 * n + i] = st.st_uid;
        out[5 * n + i] = st.st_gid;
    }
    if (dirfd >= 0) close(dirfd);
}

struct range_job {
    const char *const *starts;
    size_t n, lo, hi;
    long long *out;
    char *types;
};

static void *range_thread(void *arg)
{
    struct range_job *job = arg;
    stat_range(job->starts, job->n, job->lo, job->hi, job->out, job->types);
    return NULL;
}

/* Large batches (thousands of nodes on big hosts or in `make bench`) are
 * split over a few threads: the cost is one syscall per node, and the
 * kernel serves path lookups on several CPUs in parallel. */
#define XC_MAX_THREADS 4
#define XC_MIN_PER_THREAD 1024

int xc_stat_nodes(const char *paths, size_t n, long long *out, char *types)
{
    const char **starts;
    const char *p = paths;
    pthread_t tids[XC_MAX_THREADS];
    struct range_job jobs[XC_MAX_THREADS];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nthreads = n / XC_MIN_PER_THREAD;
    size_t started = 0;

    if (n == 0) return 0;
    starts = malloc(n * sizeof(*starts));
    if (starts == NULL) return -ENOMEM;
    for (size_t i = 0; i < n; i++, p += strlen(p) + 1)
        starts[i] = p;
    if (nthreads > (size_t)(cpus > 0 ? cpus : 1)) nthreads = (size_t)(cpus > 0 ? cpus : 1);
    if (nthreads > XC_MAX_THREADS) nthreads = XC_MAX_THREADS;
    if (nthreads < 1) nthreads = 1;
    for (size_t t = 0; t < nthreads; t++) {
        jobs[t].starts = starts;
        jobs[t].n = n;
        jobs[t].types = types;
        jobs[t].lo = n * t / nthreads;
        jobs[t].hi = n * (t + 1) / nthreads;
        jobs[t].out = out;
    }
    /* the calling thread takes the first range; helpers the rest (or it
     * does them itself when a thread cannot be started) */
    for (size_t t = 1; t < nthreads; t++) {
        if (pthread_create(&tids[t], NULL, range_thread, &jobs[t]) != 0)
            break;
        started = t;
    }
    stat_range(starts, n, jobs[0].lo, jobs[0].hi, out, types);
    for (size_t t = 1; t <= started; t++)
        pthread_join(tids[t], NULL);
    for (size_t t = started + 1; t < nthreads; t++)
        stat_range(starts, n, jobs[t].lo, jobs[t].hi, out, types);
    free(starts);
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
