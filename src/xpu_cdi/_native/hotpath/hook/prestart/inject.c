/* Inject merged CDI edits into a container from a prestart hook (see
 * inject.h; the steps, their order and the security rules are
 * docs/hook.md's "What prestart does" and "Security model").  The steps live beside it:
 * plan.c, cgroup.c, container.c, rootfs.c, place.c, undo.c,
 * ../create_symlinks.c, ../update_ldcache.c.  Every change is journalled
 * (undo.h): a failing step rolls the journal back (XF_ERR, the step and
 * the cause in xf_reason, the step left out where the cause names it:
 * xf_reason_named); a failed rollback is XF_FAIL. */
#include "hook/prestart/inject.h"
#include "hook/prestart/cgroup.h"
#include "hook/update_ldcache.h"
#include "hook/create_symlinks.h"
#include "hook/prestart/plan.h"
#include "hook/prestart/rootfs.h"
#include "hook/prestart/undo.h"
#include "kernel/bpf_dev.h"
#include "kernel/inroot.h"
#include "kernel/ns.h"
#include "kernel/spawn.h"
#include "hook/prestart/container.h"
#include "hook/prestart/place.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The injection proper, in the container's mount namespace: nodes,
 * mounts, links, ld cache.  The counts are for the note. */
static int inject_in_root(struct xf_root *x, const struct xf_plan *p, const struct xf_nsdirs *ns, int pid,
                          size_t counts[4], size_t *mounted, size_t *links, const char **ld_note,
                          const char **step)
{
    int rv;

    for (size_t i = 0; i < p->nnodes; i++) {
        const char *how = NULL;
        *step = xf_strcat3("device node '", p->nodes[i].path, "'");
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
        if ((rv = open_source(m->host, NULL, &src, &st)) != XF_OK)
            return rv;
        rv = bind_at(x, src, &st, m->target, S_ISDIR(st.st_mode) ? 'd' : 'f', m->flags, m->recursive, &made);
        if (rv != XF_OK)
            return rv;
        *mounted += (size_t)made;
    }
    *step = "create-symlinks";
    if ((rv = xf_links_create(x, p->links, p->nlinks, links)) != XF_OK)
        return rv;
    if (p->nfolders > 0) {
        *step = "update-ldcache";
        if ((rv = xf_ldcache_update(x, p->folders, p->nfolders, ns, pid, ld_note)) != XF_OK)
            return rv;
    }
    return XF_OK;
}

int xf_inject(const struct xf_container *c, const struct xf_edits *edits, const char **note)
{
    struct xf_plan p;
    struct xf_root x;
    struct xf_cgroup cg;
    struct xf_nsdirs ns = {-1, -1};
    struct xf_buf b = {0};
    int in_place = c->stage == XF_STAGE_INSIDE, have_cg = 0, rv, same, mnt_back = -1, cwd_back = -1, programs = 0;
    size_t counts[4] = {0, 0, 0, 0}, mounted = 0, links = 0;
    const char *step = "opening the container's cgroup", *ld_note = NULL, *failed = NULL;
    mode_t old_umask;

    *note = NULL;
    if ((rv = xf_plan_make(edits, &p)) != XF_OK)
        return rv;
    if (in_place && (p.nnodes > 0 || p.nmounts > 0))
        return xf_say(XF_ERR, "device nodes and mounts need the runtime's side of the container: run "
                      "xpu-cdi-hook prestart as a prestart or createRuntime hook");
    if (!in_place && c->pid <= 1)
        return xf_say(XF_ERR, "OCI state pid %d is not a container process of this runtime: register "
                      "`xpu-cdi-hook prestart` as a prestart or createRuntime hook", c->pid);
    if (c->rootfs == NULL || c->rootfs[0] != '/')
        return xf_say(XF_ERR, "the container's rootfs (root.path of config.json) is not an absolute path");

    memset(&x, 0, sizeof(x));
    x.rootfd = -1;
    old_umask = umask(0);
    /* the cgroup first, from the runtime's mount namespace */
    if (p.nrules > 0) {
        if ((rv = xf_cgroup_open(c->pid, &cg)) != XF_OK)
            goto out;
        have_cg = 1;
    }
    if (in_place) {
        same = 1; /* we are the container's root already: create as ourselves, ldconfig in our namespaces */
    } else {
        if ((rv = xf_nsdirs_open(c->pid, &ns)) != XF_OK)
            goto out;
        if ((same = xf_same_ns(&ns, c->pid, "user")) < 0) {
            rv = XF_ERR;
            goto out;
        }
    }
    x.userns = !same;
    if (x.userns) { /* the ids to go back to after each creation as the container's root */
        x.euid = (unsigned)geteuid();
        x.egid = (unsigned)getegid();
    }
    if (x.userns && ((rv = xf_root_owner(c->pid, "uid", &x.owner_uid)) != XF_OK ||
                     (rv = xf_root_owner(c->pid, "gid", &x.owner_gid)) != XF_OK))
        goto out;

    step = "joining the container's mount namespace";
    if (c->stage == XF_STAGE_JOIN) {
        /* keep the way back: the hook reports (and logs) from where it
         * started (same namespace, same cwd) */
        int fd;
        mnt_back = c->exits ? -1 : openat(ns.self, "mnt", O_RDONLY | O_CLOEXEC);
        cwd_back = c->exits ? -1 : open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (!c->exits && (mnt_back < 0 || cwd_back < 0)) {
            rv = xf_say(XF_ERR, "cannot keep the hook's own namespace and cwd: %s", strerror(errno));
            goto out;
        }
        if ((fd = openat(ns.theirs, "mnt", O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWNS) != 0) {
            rv = xf_say(XF_ERR, "setns /proc/%d/ns/mnt: %s", c->pid, strerror(errno));
            if (fd >= 0)
                close(fd);
            goto out;
        }
        close(fd);
    }
    step = "the container's rootfs";
    x.rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (x.rootfd < 0) {
        rv = xf_say(XF_ERR, "'%s' cannot be opened: %s (root.path of config.json)", c->rootfs, strerror(errno));
        goto out;
    }
    rv = inject_in_root(&x, &p, in_place ? NULL : &ns, c->pid, counts, &mounted, &links, &ld_note, &step);
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
    if (rv == XF_OK && c->exits)
        return rv; /* the exit closes every fd */
    if (x.rootfd >= 0)
        close(x.rootfd);
    if (rv == XF_OK) {
        xf_undo_close(&x.undo);
    } else {
        /* take everything back (still in the container's namespace) */
        /* the step names what failed, unless the failing call's reason already does */
        const char *why = xf_strdup(xf_reason_named ? xf_reason : (xf_wrap(XF_ERR, "%s", step), xf_reason));
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
    xf_nsdirs_close(&ns);
    if (have_cg)
        xf_cgroup_close(&cg);
    umask(old_umask);
    if (rv != XF_OK)
        *note = NULL;
    return rv;
}
