/* Finding the container's devices cgroup (cgroup.h): its v1 devices
 * hierarchy or its cgroup2 directory, from /proc/self/mountinfo and
 * /proc/PID/cgroup, and opening it.
 *
 * The texts parsed here are the kernel's, but a hostile container could
 * influence path parts of them: any text holding a control character
 * other than tab and newline, or a non-ASCII byte, is declined rather
 * than split by guesswork; what remains splits on ' ', '\t' and '\n'. */
#include "kernel/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* /proc/self/mountinfo of a busy Kubernetes node is a few hundred KiB;
 * /proc/PID/cgroup is one line per hierarchy. */
#define MOUNTINFO_LIMIT (8u << 20)
#define CGROUPS_LIMIT (1u << 20)
/* resolver.bpf_dev_query asks for at most 64 ids (more: ENOSPC) */
#define MAX_PROGS 64
#define VERIFIER_LOG (1u << 16)

struct mount {
    const char *mountpoint, *root, *fstype, *opts;   /* unescaped; opts comma-separated */
};

/* Texts whose lines and fields split the same in C and Python (above). */
static int plain_text(const char *s, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || (c < 0x20 && c != '\t' && c != '\n'))
            return xf_say(XF_ERR, "%s: byte 0x%02x at offset %zu (not plain ASCII)", what, c, i);
    }
    return XF_OK;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Python's str.split(): up to max whitespace-separated fields of [s, end)
 * as NUL-terminated copies; returns how many there are in all. */
static size_t split_fields(const char *s, const char *end, char **out, size_t max)
{
    size_t n = 0;

    while (s < end) {
        const char *start;
        while (s < end && is_space(*s))
            s++;
        if (s == end)
            break;
        start = s;
        while (s < end && !is_space(*s))
            s++;
        if (n < max)
            out[n] = xf_strndup(start, (size_t)(s - start));
        n++;
    }
    return n;
}

/* _unescape: "\" followed by digits (the next up to three characters, all
 * digits) is the character of that octal number, as Python does it.  The
 * kernel escapes only space, tab, newline and backslash; anything the
 * Python would fail on (8 or 9: int() raises) or turn into a NUL or a
 * non-ASCII character is declined. */
static int unescape(const char *field, const char **out)
{
    size_t n = strlen(field), i = 0, o = 0;
    char *buf;

    if (strchr(field, '\\') == NULL) {
        *out = field;
        return XF_OK;
    }
    buf = xf_alloc(n + 1);
    while (i < n) {
        size_t k = 0;
        unsigned value = 0;
        if (field[i] == '\\')
            while (k < 3 && i + 1 + k < n && is_digit(field[i + 1 + k]))
                k++;
        /* Python: field[i+1:i+4].isdigit() -- the whole slice, however short */
        if (k == 0 || k != (n - (i + 1) < 3 ? n - (i + 1) : 3)) {
            buf[o++] = field[i++];
            continue;
        }
        for (size_t j = 0; j < k; j++) {
            char d = field[i + 1 + j];
            if (d > '7')
                return xf_say(XF_ERR, "mountinfo: bad octal escape in %s", field);
            value = value * 8 + (unsigned)(d - '0');
        }
        if (value == 0 || value >= 0x80)
            return xf_say(XF_ERR, "mountinfo: escape \\%03o in %s", value, field);
        buf[o++] = (char)value;
        i += 4;
    }
    buf[o] = '\0';
    *out = buf;
    return XF_OK;
}

/* cgroup_mounts: every mount whose file system type starts with "cgroup",
 * in mountinfo order.  The text must be NUL-terminated at len. */
static int cgroup_mounts(const char *text, struct mount **out, size_t *count)
{
    struct mount *m = NULL;
    size_t n = 0, cap = 0;
    const char *line = text;

    while (*line != '\0') {
        const char *eol = strchr(line, '\n'), *sep;
        char *left[5], *right[3];
        size_t nl, nr;
        if (eol == NULL)
            eol = line + strlen(line);
        sep = memmem(line, (size_t)(eol - line), " - ", 3);
        if (sep != NULL) {
            nl = split_fields(line, sep, left, 5);
            nr = split_fields(sep + 3, eol, right, 3);
            if (nl >= 5 && nr >= 3 && strncmp(right[0], "cgroup", 6) == 0) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 16;
                    m = xf_realloc(m, cap * sizeof(*m));
                }
                if (unescape(left[4], &m[n].mountpoint) != XF_OK || unescape(left[3], &m[n].root) != XF_OK)
                    return XF_ERR;
                m[n].fstype = right[0];
                m[n].opts = right[2];
                n++;
            }
        }
        line = *eol ? eol + 1 : eol;
    }
    *out = m;
    *count = n;
    return XF_OK;
}

/* "devices" is one of the comma-separated super options. */
static int has_option(const char *opts, const char *want)
{
    size_t wl = strlen(want);

    for (const char *p = opts;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == wl && memcmp(p, want, wl) == 0)
            return 1;
        if (comma == NULL)
            return 0;
        p = comma;
    }
}

/* proc_cgroups, reduced to the two entries locate needs: the path of the
 * v2 entry ("" controller) and of "devices"; later lines win, and a
 * controller list such as "devices," counts for both. */
static void proc_cgroups(const char *text, const char **v2, const char **devices)
{
    const char *line = text;

    *v2 = *devices = NULL;
    while (*line != '\0') {
        const char *eol = strchr(line, '\n'), *c1, *c2;
        if (eol == NULL)
            eol = line + strlen(line);
        c1 = memchr(line, ':', (size_t)(eol - line));
        c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - (c1 + 1))) : NULL;
        if (c2 != NULL) {
            const char *path = xf_strndup(c2 + 1, (size_t)(eol - (c2 + 1)));
            for (const char *p = c1 + 1;; p++) {
                const char *end = memchr(p, ',', (size_t)(c2 - p));
                size_t len = end ? (size_t)(end - p) : (size_t)(c2 - p);
                if (len == 0)
                    *v2 = path;
                else if (len == 7 && memcmp(p, "devices", 7) == 0)
                    *devices = path;
                if (end == NULL)
                    break;
                p = end;
            }
        }
        line = *eol ? eol + 1 : eol;
    }
}

/* _below: the directory of cgroup path in a hierarchy mounted at
 * mountpoint whose mount shows it from root; then os.path.join(mountpoint,
 * path.lstrip("/")), which adds a "/" even before an empty tail. */
static const char *below(const char *mountpoint, const char *root, const char *path)
{
    size_t rl = strlen(root), ml = strlen(mountpoint);

    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    if (strcmp(root, "/") != 0 &&
        (strcmp(path, root) == 0 || (strncmp(path, root, rl) == 0 && path[rl] == '/')))
        path += rl;
    while (*path == '/')
        path++;
    if (ml == 0 || mountpoint[ml - 1] == '/')
        return xf_printf("%s%s", mountpoint, path);
    return xf_printf("%s/%s", mountpoint, path);
}

int xf_cgroup_locate(const char *mountinfo, size_t mlen, const char *cgroups, size_t clen,
                     int *version, const char **path)
{
    struct mount *m, *unified = NULL, *v1 = NULL, *top = NULL;
    size_t n;
    const char *v2path, *devpath;

    if (plain_text(mountinfo, mlen, "mountinfo") != XF_OK || plain_text(cgroups, clen, "cgroups") != XF_OK)
        return XF_ERR;
    if (cgroup_mounts(mountinfo, &m, &n) != XF_OK)
        return XF_ERR;
    proc_cgroups(cgroups, &v2path, &devpath);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].fstype, "cgroup2") == 0) {
            if (unified == NULL)
                unified = &m[i];
            if (top == NULL && strcmp(m[i].mountpoint, "/sys/fs/cgroup") == 0)
                top = &m[i];
        } else if (v1 == NULL && strcmp(m[i].fstype, "cgroup") == 0 && has_option(m[i].opts, "devices")) {
            v1 = &m[i];
        }
    }
    /* runc's decision: cgroup2 on /sys/fs/cgroup is v2; else the v1
     * devices controller; else any cgroup2 mount */
    if (top != NULL || (v1 == NULL && unified != NULL)) {
        struct mount *use = top ? top : unified;
        if (v2path == NULL)
            return xf_say(XF_ERR, "cgroup v2 is mounted but the container is in no cgroup v2 group");
        *version = 2;
        *path = below(use->mountpoint, use->root, v2path);
        return XF_OK;
    }
    if (v1 != NULL) {
        if (devpath == NULL)
            return xf_say(XF_ERR, "the container is in no cgroup v1 devices group");
        *version = 1;
        *path = below(v1->mountpoint, v1->root, devpath);
        return XF_OK;
    }
    return xf_say(XF_ERR, "no cgroup device controller is mounted (neither v1 devices nor cgroup2)");
}

int xf_cgroup_open(int pid, struct xf_cgroup *out)
{
    char *cgroups, *mountinfo;
    size_t clen, mlen;
    const char *procfile = xf_printf("/proc/%d/cgroup", pid);
    int version, fd, flags;
    const char *path;

    out->fd = -1;
    if (xf_read_file(procfile, CGROUPS_LIMIT, &cgroups, &clen, NULL) != XF_OK ||
        xf_read_file("/proc/self/mountinfo", MOUNTINFO_LIMIT, &mountinfo, &mlen, NULL) != XF_OK)
        return xf_say(XF_ERR, "cannot read the cgroups of container process %d: %s", pid, xf_strdup(xf_reason));
    if (xf_cgroup_locate(mountinfo, mlen, cgroups, clen, &version, &path) != XF_OK)
        return XF_ERR;
    /* v2 needs a readable fd (bpf(2) refuses O_PATH); v1 only *at() calls */
    flags = version == 2 ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_PATH | O_DIRECTORY | O_CLOEXEC;
    do
        fd = open(path, flags);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return xf_say(XF_ERR, "cgroup '%s' of container process %d: %s", path, pid, strerror(errno));
    out->version = version;
    out->path = path;
    out->fd = fd;
    return XF_OK;
}

void xf_cgroup_close(struct xf_cgroup *cg)
{
    if (cg->fd >= 0)
        close(cg->fd);
    cg->fd = -1;
}
