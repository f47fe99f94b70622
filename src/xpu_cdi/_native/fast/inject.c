/* Inject merged CDI edits into a container from a prestart hook: the C
 * twin of xpu_cdi/hook/inject.py (namespaces, device nodes, bind mounts,
 * the order of the steps, the note).  See inject.h.  The steps it runs
 * live beside it, each the twin of one Python module: plan.c (plan.py),
 * rootfs.c (rootfs.py), links.c (links.py), ldcache.c (ldcache.py),
 * cgroup.c (cgroup.py).
 *
 * Same steps, same order, same checks as the Python hook:
 *   plan (host side, nothing touched: node numbers from hostPath, mount
 *   flags, our spec hooks parsed) -> open the cgroup -> user namespace
 *   owner -> namespaces for ldconfig -> join the container's mount
 *   namespace -> device nodes -> bind mounts -> symlinks -> ld cache ->
 *   allow the devices in the cgroup, last.
 *
 * Security: the hook runs as root against a possibly hostile image.
 * Every container path is resolved and created below the rootfs fd
 * (rootfs.h), mounts go onto /proc/self/fd/N of resolved fds, mount
 * sources must be root-owned (and, except device nodes, not
 * group/other-writable), and the image's ldconfig runs confined
 * (ldcache.h).
 *
 * Every change is journalled (undo.h).  Anything the plan refuses is
 * XF_ERR before anything is touched; a failing step rolls the journal
 * back and returns to the hook's own mount namespace (XF_ERR, the step
 * and the cause in xf_reason); a failed rollback is XF_FAIL. */
#include "inject.h"
#include "cgroup.h"
#include "ldcache.h"
#include "links.h"
#include "plan.h"
#include "rootfs.h"
#include "undo.h"
#include "xc.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_MAP_BYTES 65536

static int undo_umount(const long *a)
{
    char p[32];
    return xc_umount(xf_fd_path(p, (int)a[0]), MNT_DETACH);
}

/* ------------------------------------------------------------------ */
/* Nodes and mounts (inject.py)                                        */
/* ------------------------------------------------------------------ */

/* _open_source: O_PATH fd of a mount source (host path, links followed),
 * root-owned -- or, for a device node (node not NULL), owned by the uid and
 * gid the node is declared with (an HwHiAiUser node) -- and, unless a
 * device node, not group/other-writable. */
static int open_source(const char *host, const struct xf_plan_node *node, int *fd_out)
{
    int writable_ok = node != NULL;
    struct stat st;
    int fd = open(host, O_PATH | O_CLOEXEC), err;

    if (fd < 0)
        return xf_say(XF_ERR, "mount source '%s': %s", host, strerror(errno));
    if (fstat(fd, &st) != 0) {
        err = errno;
        close(fd);
        return xf_say(XF_ERR, "mount source '%s': %s", host, strerror(err));
    }
    if (st.st_uid != 0 && !(node != NULL && (long long)st.st_uid == node->uid && (long long)st.st_gid == node->gid)) {
        close(fd);
        return xf_say(XF_ERR, "mount source '%s' is owned by uid %u, not root: refusing to expose it to containers; "
                      "fix its ownership or mode", host, (unsigned)st.st_uid);
    }
    if (!writable_ok && (st.st_mode & 022)) {
        close(fd);
        return xf_say(XF_ERR, "mount source '%s' is group- or world-writable (mode 0o%o): refusing to expose it to "
                      "containers; fix its ownership or mode", host, (unsigned)(st.st_mode & 07777));
    }
    *fd_out = fd;
    return XF_OK;
}

/* inject.source_flags: the MS_* per-mount flags of the mount src is on
 * (statvfs f_flag; ST_RDONLY..ST_NOEXEC, ST_NOATIME and ST_NODIRATIME share
 * the MS_* values, ST_RELATIME does not).  The spec's atime options are
 * ignored, so the atime flags passed are the source's, which is what the
 * kernel keeps anyway. */
static int source_flags(int src, unsigned long *out)
{
    static const struct {
        unsigned long st, ms;
    } map[] = {{ST_RDONLY, MS_RDONLY},   {ST_NOSUID, MS_NOSUID},         {ST_NODEV, MS_NODEV},
               {ST_NOEXEC, MS_NOEXEC},   {ST_NOATIME, MS_NOATIME},       {ST_NODIRATIME, MS_NODIRATIME},
               {ST_RELATIME, MS_RELATIME}};
    struct statvfs sv;

    if (fstatvfs(src, &sv) != 0)
        return xf_say(XF_ERR, "statvfs of the mount source: %s", strerror(errno));
    *out = 0;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (sv.f_flag & map[i].st)
            *out |= map[i].ms;
    return XF_OK;
}

/* _bind: bind src onto cpath (made as leaf 'd'/'f' if missing), then
 * remount with flags.  *made 0 when cpath already shows src. */
static int bind_at(struct xf_root *x, int src, const char *cpath, char leaf, unsigned long flags, int recursive,
                   int *made)
{
    struct stat a, b;
    char sp[32], tp[32];
    int target, top, rv;

    *made = 0;
    if ((rv = xf_ensure(x, cpath, leaf, &target)) != XF_OK)
        return rv;
    if (fstat(target, &a) != 0 || fstat(src, &b) != 0) {
        rv = errno;
        close(target);
        return xf_say(XF_ERR, "fstat: %s", strerror(rv));
    }
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        close(target);
        return XF_OK;
    }
    rv = xc_mount(xf_fd_path(sp, src), xf_fd_path(tp, target), NULL, MS_BIND | (recursive ? MS_REC : 0), NULL);
    close(target);
    if (rv != 0)
        return xf_say(XF_ERR, "mount: %s", strerror(-rv));
    /* the O_PATH fd we mounted on names the covered inode: resolve again
     * to reach the new mount, and check it is what we bound */
    rv = xc_resolve_in_root(x->rootfd, cpath, 0, &top);
    if (rv != 0) {
        x->leaked = xf_printf("the bind mount on '%s' (cannot find it again: %s)", cpath, strerror(-rv));
        return xf_say(XF_ERR, "resolve %s after mounting: %s", cpath, strerror(-rv));
    }
    /* journal the unmount only of what is our mount: unmounting whatever
     * a raced path leads to could take down a mount the runtime made */
    if (fstat(top, &a) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(top);
        x->leaked = xf_printf("the bind mount on '%s' (not where it was made)", cpath);
        return xf_say(XF_ERR, "the bind mount is not where it was made (raced?)");
    }
    xf_undo_keep_fd(&x->undo, top);
    xf_undo_push(&x->undo, xf_printf("unmount '%s'", cpath), undo_umount, top, 0, 0, 0);
    if (flags) {
        /* a bind remount replaces the mount's flags: keep those the
         * source's mount has (a nosuid/noexec/ro host filesystem stays so
         * in the container), which in a user namespace the kernel also
         * demands (it refuses to clear flags locked when the namespace was
         * made) */
        unsigned long have = 0;
        if ((rv = source_flags(src, &have)) != XF_OK)
            return rv;
        if ((rv = xc_mount(NULL, xf_fd_path(tp, top), NULL, MS_REMOUNT | MS_BIND | flags | have, NULL)) != 0)
            return xf_say(XF_ERR, "remount: %s", strerror(-rv));
    }
    *made = 1;
    return XF_OK;
}

/* make_node: mknod (as the container's root owns it), or bind the host
 * node (user namespace, or mknod refused); *how "mknod" / "bind" / "exists". */
static int make_node(struct xf_root *x, const struct xf_plan_node *n, int bind, const char **how)
{
    dev_t rdev = makedev(n->major, n->minor);
    mode_t fmt = n->kind == 'b' ? S_IFBLK : S_IFCHR;
    struct stat st;
    int parent, src, rv, made;
    const char *name;

    if (!bind) {
        if ((rv = xf_parent_of(x, n->path, &parent, &name)) != XF_OK)
            return rv;
        rv = xf_create_as_owner(x, XF_MK_NODE, parent, name, fmt | n->mode, rdev, NULL);
        if (rv == -EEXIST) {
            if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rv = errno;
                close(parent);
                return xf_say(XF_ERR, "stat: %s", strerror(rv));
            }
            close(parent);
            if ((st.st_mode & S_IFMT) == fmt && st.st_rdev == rdev) {
                *how = "exists";
                return x->fsids_lost ? xf_say(XF_ERR, "cannot restore the filesystem ids") : XF_OK;
            }
            return xf_say(XF_ERR, "device node '%s' already exists in the container and is not %c %u:%u", n->path,
                          n->kind, n->major, n->minor);
        }
        if (rv == -EPERM || rv == -EACCES) { /* e.g. a user namespace: bind the host node instead */
            close(parent);
            if (x->fsids_lost)
                return xf_say(XF_ERR, "cannot restore the filesystem ids");
            bind = 1;
        } else if (rv != 0) {
            close(parent);
            return xf_say(XF_ERR, "mknod: %s", strerror(-rv));
        } else {
            rv = xf_journal_unlink(x, parent, name, 0, xf_printf("remove node '%s'", n->path));
            if (rv == 0 && x->fsids_lost)
                rv = -EPERM;
            if (rv == 0 && n->chown &&
                fchownat(parent, name, (uid_t)n->uid, (gid_t)n->gid, AT_SYMLINK_NOFOLLOW) != 0)
                rv = -errno;
            close(parent);
            if (rv != 0)
                return xf_say(XF_ERR, "%s", strerror(-rv));
            *how = "mknod";
            return XF_OK;
        }
    }
    if ((rv = open_source(n->host, n, &src)) != XF_OK)
        return rv;
    if (fstat(src, &st) != 0 || (st.st_mode & S_IFMT) != fmt || st.st_rdev != rdev) {
        close(src);
        return xf_say(XF_ERR, "host node %s is not %c %u:%u", n->host, n->kind, n->major, n->minor);
    }
    rv = bind_at(x, src, n->path, 'f', MS_NOSUID, 0, &made);
    close(src);
    *how = "bind";
    return rv;
}

/* ------------------------------------------------------------------ */
/* Namespaces (inject.py)                                              */
/* ------------------------------------------------------------------ */

/* same_ns: 1 same, 0 different, -1 unreadable (reason set). */
static int same_ns(int pid, const char *name)
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
static int root_owner(int pid, const char *kind, unsigned *out)
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
static int open_namespaces(int pid, int *fds, int *types, size_t *n)
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

/* ------------------------------------------------------------------ */
/* inject.inject                                                        */
/* ------------------------------------------------------------------ */

/* The injection proper, in the container's mount namespace: nodes,
 * mounts, links, ld cache.  The counts are for the note. */
static int inject_in_root(struct xf_root *x, const struct xf_plan *p, const int *nsfds, const int *nstypes, size_t nns,
                          size_t counts[4], size_t *mounted, size_t *links, const char **ld_note,
                          const char **step)
{
    int rv;

    for (size_t i = 0; i < p->nnodes; i++) {
        const char *how = NULL;
        *step = xf_printf("device node '%s'", p->nodes[i].path);
        if ((rv = make_node(x, &p->nodes[i], x->userns, &how)) != XF_OK)
            return rv;
        counts[0]++;
        counts[how[0] == 'm' ? 1 : how[0] == 'b' ? 2 : 3]++;
    }
    for (size_t i = 0; i < p->nmounts; i++) {
        const struct xf_plan_mount *m = &p->mounts[i];
        struct stat st;
        int src, made = 0;
        *step = xf_printf("mount '%s' -> '%s'", m->host, m->target);
        if ((rv = open_source(m->host, NULL, &src)) != XF_OK)
            return rv;
        if (fstat(src, &st) != 0) {
            rv = errno;
            close(src);
            return xf_say(XF_ERR, "fstat: %s", strerror(rv));
        }
        rv = bind_at(x, src, m->target, S_ISDIR(st.st_mode) ? 'd' : 'f', m->flags, m->recursive, &made);
        close(src);
        if (rv != XF_OK)
            return rv;
        *mounted += (size_t)made;
    }
    *step = "create-symlinks";
    if ((rv = xf_links_create(x, p->links, p->nlinks, links)) != XF_OK)
        return rv;
    if (p->nfolders > 0) {
        *step = "update-ldcache";
        if ((rv = xf_ldcache_update(x, p->folders, p->nfolders, nsfds, nstypes, nns, ld_note)) != XF_OK)
            return rv;
    }
    return XF_OK;
}

int xf_inject(const struct xf_container *c, const struct xf_edits *edits, const char **note)
{
    struct xf_plan p;
    struct xf_root x;
    struct xf_cgroup cg;
    struct xf_buf b = {0};
    int have_cg = 0, rv, same, mnt_back = -1, cwd_back = -1, programs = 0;
    int nsfds[8], nstypes[8];
    size_t nns = 0, counts[4] = {0, 0, 0, 0}, mounted = 0, links = 0;
    const char *step = "opening the container's cgroup", *ld_note = NULL, *failed = NULL;
    mode_t old_umask;

    *note = NULL;
    if ((rv = xf_plan_make(edits, &p)) != XF_OK)
        return rv;
    if (c->in_place && (p.nnodes > 0 || p.nmounts > 0))
        return xf_say(XF_ERR, "device nodes and mounts need the runtime's side of the container: run "
                      "xpu-cdi-hook prestart as a prestart or createRuntime hook");
    if (!c->in_place && c->pid <= 1)
        return xf_say(XF_ERR, "OCI state pid %d is not a container process of this runtime: register "
                      "`xpu-cdi-hook prestart` as a prestart or createRuntime hook", c->pid);
    if (c->rootfs == NULL || c->rootfs[0] != '/')
        return xf_say(XF_ERR, "the container's rootfs (root.path of config.json) is not an absolute path");

    memset(&x, 0, sizeof(x));
    x.rootfd = -1;
    x.euid = (unsigned)geteuid();
    x.egid = (unsigned)getegid();
    old_umask = umask(0);
    /* the cgroup first, from the runtime's mount namespace */
    if (p.nrules > 0) {
        if ((rv = xf_cgroup_open(c->pid, &cg)) != XF_OK)
            goto out;
        have_cg = 1;
    }
    if (c->in_place)
        same = 1; /* we are the container's root already: create as ourselves, ldconfig in our namespaces */
    else if ((same = same_ns(c->pid, "user")) < 0) {
        rv = XF_ERR;
        goto out;
    }
    x.userns = !same;
    if (x.userns && ((rv = root_owner(c->pid, "uid", &x.owner_uid)) != XF_OK ||
                     (rv = root_owner(c->pid, "gid", &x.owner_gid)) != XF_OK))
        goto out;
    if (!c->in_place && p.nfolders > 0 && (rv = open_namespaces(c->pid, nsfds, nstypes, &nns)) != XF_OK)
        goto out;

    step = "joining the container's mount namespace";
    if (c->in_place)
        same = 1;
    else if ((same = same_ns(c->pid, "mnt")) < 0) {
        rv = XF_ERR;
        goto out;
    }
    if (!same) {
        /* keep the way back: the hook reports (and logs) from where it
         * started (same namespace, same cwd) */
        char path[64];
        mnt_back = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        cwd_back = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (mnt_back < 0 || cwd_back < 0) {
            rv = xf_say(XF_ERR, "cannot keep the hook's own namespace and cwd: %s", strerror(errno));
            goto out;
        }
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", c->pid);
        if ((rv = xc_setns(path, CLONE_NEWNS)) != 0) {
            rv = xf_say(XF_ERR, "setns %s: %s", path, strerror(-rv));
            goto out;
        }
    }
    step = "the container's rootfs";
    x.rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (x.rootfd < 0) {
        rv = xf_say(XF_ERR, "'%s' cannot be opened: %s (root.path of config.json)", c->rootfs, strerror(errno));
        goto out;
    }
    rv = inject_in_root(&x, &p, nsfds, nstypes, nns, counts, &mounted, &links, &ld_note, &step);
    if (rv != XF_OK)
        goto out;
    if (have_cg) {
        step = "cgroup device rules";
        if ((rv = xf_cgroup_allow(&cg, p.rules, p.nrules, &x.undo, &programs)) != XF_OK)
            goto out;
    }

    if (c->tools_note) {
        if (p.nlinks > 0)
            xf_buf_addf(&b, "%zu link(s) created", links);
        if (ld_note != NULL)
            xf_buf_addf(&b, "%s%s", p.nlinks > 0 ? "; " : "", ld_note);
        *note = b.data;
        goto out;
    }
    xf_buf_addf(&b, "%zu node(s) (%zu mknod, %zu bind, %zu present), %zu mount(s) (%zu present), %zu link(s), "
                "cgroup v", counts[0], counts[1], counts[2], counts[3], mounted, p.nmounts - mounted, links);
    if (have_cg)
        xf_buf_addf(&b, "%d", cg.version);
    else
        xf_buf_adds(&b, "-");
    if (programs > 0)
        xf_buf_addf(&b, " (%d device program(s) replaced)", programs);
    for (size_t i = 0; i < p.nnotes; i++)
        xf_buf_addf(&b, "; %s", p.notes[i]);
    if (ld_note != NULL)
        xf_buf_addf(&b, "; %s", ld_note);
    *note = b.data;

out:
    if (x.rootfd >= 0)
        close(x.rootfd);
    if (rv == XF_OK) {
        xf_undo_close(&x.undo);
    } else {
        /* take everything back (still in the container's namespace) */
        /* the step names what failed, unless the reason already does */
        int named = strncmp(xf_reason, step, strlen(step)) == 0 || strncmp(xf_reason, "mount source ", 13) == 0;
        char *why = named ? xf_strdup(xf_reason) : xf_printf("%s: %s", step, xf_reason);
        size_t nfailed = xf_undo_rollback(&x.undo, &failed);
        if (nfailed > 0 || x.leaked != NULL || x.fsids_lost) {
            rv = xf_say(XF_FAIL, "%s (and could not undo: %s%s%s%s)", why, failed ? failed : "",
                        failed && x.leaked ? "; " : "", x.leaked ? x.leaked : "",
                        x.fsids_lost ? " [filesystem ids not restored]" : "");
        } else {
            rv = xf_say(XF_ERR, "%s", why);
        }
    }
    if (mnt_back >= 0) {
        if (setns(mnt_back, CLONE_NEWNS) != 0 || fchdir(cwd_back) != 0) {
            const char *why = xf_strdup(xf_reason);
            rv = xf_say(XF_FAIL, "%s%scannot return to the hook's own mount namespace: %s", rv == XF_OK ? "" : why,
                        rv == XF_OK ? "" : "; ", strerror(errno));
        }
    }
    if (mnt_back >= 0)
        close(mnt_back);
    if (cwd_back >= 0)
        close(cwd_back);
    for (size_t i = 0; i < nns; i++)
        close(nsfds[i]);
    if (have_cg)
        xf_cgroup_close(&cg);
    umask(old_umask);
    if (rv != XF_OK)
        *note = NULL;
    return rv;
}
