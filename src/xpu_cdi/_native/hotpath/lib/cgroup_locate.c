/* Which cgroup directory holds the container's device rules, from the
 * texts of /proc/self/mountinfo and /proc/PID/cgroup (cgroup_locate.h).
 *
 * Both texts are read the way the kernel writes them (proc(5), cgroups(7)).
 * A mount point can be named by whoever may mount (a container with
 * bidirectional mount propagation too), but the kernel escapes the bytes
 * that would split a mountinfo line (space, tab, newline, backslash), so
 * any other name -- non-ASCII, control characters -- is just a name. */
#include "lib/cgroup_locate.h"

#include <string.h>

/* A mountinfo line: mount ID, parent ID, major:minor, root, mount point,
 * mount options, zero or more optional fields, "-", file system type,
 * source, super options (fs/proc_namespace.c, show_mountinfo). */
#define MI_ROOT 3
#define MI_MOUNTPOINT 4
#define MI_OPTIONAL 6   /* the first optional field or the "-" */
#define MI_MAX_FIELDS 64 /* the kernel writes 10 and up to four optional fields */

struct mount {
    const char *mountpoint, *root, *fstype, *opts;   /* unescaped; opts comma-separated */
};

struct field {
    const char *s;
    size_t n;
};

static int is_octal(char c)
{
    return c >= '0' && c <= '7';
}

/* The fields of [s, end): the kernel separates them by exactly one space
 * and never writes a space inside one (it is escaped), so every space
 * ends a field.  Returns how many there are in all; the first max are
 * stored (pointers into the text, nothing copied). */
static size_t split_fields(const char *s, const char *end, struct field *out, size_t max)
{
    size_t n = 0;

    for (;;) {
        const char *sp = memchr(s, ' ', (size_t)(end - s)), *stop = sp ? sp : end;
        if (n < max) {
            out[n].s = s;
            out[n].n = (size_t)(stop - s);
        }
        n++;
        if (sp == NULL)
            return n;
        s = sp + 1;
    }
}

static int field_is(const struct field *f, const char *want)
{
    return f->n == strlen(want) && memcmp(f->s, want, f->n) == 0;
}

/* A path field as it was before the kernel escaped it: the kernel writes
 * each byte of " \t\n\\" as a backslash and three octal digits (\040,
 * \011, \012, \134: seq_escape's octal form), so in its text a backslash
 * always starts three octal digits of a byte.  Anything else (a lone
 * backslash, \8, \777) or an escaped NUL is not the kernel's text and is
 * declined.  A NUL-terminated copy. */
static int unescape(const struct field *f, const char **out)
{
    char *buf = xf_alloc(f->n + 1);
    size_t o = 0;

    for (size_t i = 0; i < f->n;) {
        const char *d = f->s + i + 1;
        unsigned value;
        if (f->s[i] != '\\') {
            buf[o++] = f->s[i++];
            continue;
        }
        if (i + 3 >= f->n || !is_octal(d[0]) || !is_octal(d[1]) || !is_octal(d[2]))
            return xf_say(XF_ERR, "mountinfo: bad escape in %s (a backslash must start three octal digits)",
                          xf_strndup(f->s, f->n));
        value = (unsigned)(d[0] - '0') * 64 + (unsigned)(d[1] - '0') * 8 + (unsigned)(d[2] - '0');
        if (value == 0 || value > 0xff)
            return xf_say(XF_ERR, "mountinfo: escape \\%03o in %s is not a byte of a path", value,
                          xf_strndup(f->s, f->n));
        buf[o++] = (char)value;
        i += 4;
    }
    buf[o] = '\0';
    *out = buf;
    return XF_OK;
}

/* cgroup_mounts: every mount whose file system type is cgroup or cgroup2,
 * in mountinfo order.  A line of another shape is no mount of ours and is
 * passed over.  The text must be NUL-terminated at len. */
static int cgroup_mounts(const char *text, struct mount **out, size_t *count)
{
    struct mount *m = NULL;
    size_t n = 0, cap = 0;
    const char *line = text;

    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        struct field f[MI_MAX_FIELDS];
        size_t nf, sep;
        if (eol == NULL)
            eol = line + strlen(line);
        nf = split_fields(line, eol, f, MI_MAX_FIELDS);
        if (nf > MI_MAX_FIELDS)
            nf = MI_MAX_FIELDS;
        for (sep = MI_OPTIONAL; sep < nf && !field_is(&f[sep], "-"); sep++)
            ;
        /* after the "-": file system type, source, super options */
        if (sep + 3 < nf && (field_is(&f[sep + 1], "cgroup") || field_is(&f[sep + 1], "cgroup2"))) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                m = xf_realloc(m, cap * sizeof(*m));
            }
            if (unescape(&f[MI_MOUNTPOINT], &m[n].mountpoint) != XF_OK || unescape(&f[MI_ROOT], &m[n].root) != XF_OK)
                return XF_ERR;
            m[n].fstype = xf_strndup(f[sep + 1].s, f[sep + 1].n);
            m[n].opts = xf_strndup(f[sep + 3].s, f[sep + 3].n);
            n++;
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

/* proc_cgroups: the two entries of /proc/PID/cgroup locate needs.  The
 * kernel writes a line "hierarchy-ID:controller-list:cgroup-path" per
 * hierarchy, the path raw to the end of the line (it may hold ':'):
 * the cgroup2 line has an empty controller list ("0::/path"), a v1
 * hierarchy lists its controllers comma-separated ("7:devices:/path"). */
void xf_proc_cgroups(const char *text, const char **v2, const char **devices)
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
            if (c2 == c1 + 1)
                *v2 = path;
            for (const char *p = c1 + 1; p < c2; p++) {
                const char *end = memchr(p, ',', (size_t)(c2 - p));
                size_t len = end ? (size_t)(end - p) : (size_t)(c2 - p);
                if (len == 7 && memcmp(p, "devices", 7) == 0)
                    *devices = path;
                if (end == NULL)
                    break;
                p = end;
            }
        }
        line = *eol ? eol + 1 : eol;
    }
}

/* The directory of cgroup path in a hierarchy mounted at mountpoint,
 * whose mount shows the hierarchy from root (mountinfo's root field: "/"
 * unless a subtree was mounted): mountpoint joined with one "/" to the
 * path below root (a trailing "/" when path is root itself). */
const char *xf_cgroup_dir(const char *mountpoint, const char *root, const char *path)
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

    /* the kernel writes no NUL in either: one would hide the text after it */
    if (memchr(mountinfo, '\0', mlen) != NULL || memchr(cgroups, '\0', clen) != NULL)
        return xf_say(XF_ERR, "%s holds a NUL byte: not the kernel's text",
                      memchr(mountinfo, '\0', mlen) ? "mountinfo" : "/proc/PID/cgroup");
    if (cgroup_mounts(mountinfo, &m, &n) != XF_OK)
        return XF_ERR;
    xf_proc_cgroups(cgroups, &v2path, &devpath);
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
        *path = xf_cgroup_dir(use->mountpoint, use->root, v2path);
        return XF_OK;
    }
    if (v1 != NULL) {
        if (devpath == NULL)
            return xf_say(XF_ERR, "the container is in no cgroup v1 devices group");
        *version = 1;
        *path = xf_cgroup_dir(v1->mountpoint, v1->root, devpath);
        return XF_OK;
    }
    return xf_say(XF_ERR, "no cgroup device controller is mounted (neither v1 devices nor cgroup2)");
}

/* The directory of a cgroup opened as cgroup.h says (v2: readable, for bpf(2)). */
