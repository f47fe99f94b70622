/* Inject merged CDI edits into a container from a prestart hook: the C
 * twin of xpu_cdi/hook/plan.py, inject.py, rootfs.py (with _inroot.walk),
 * links.py and ldcache.py.  See inject.h.
 *
 * Same steps, same order, same checks as the Python hook:
 *   plan (host side, nothing touched: node numbers from hostPath, mount
 *   flags, our spec hooks parsed) -> open the cgroup -> user namespace
 *   owner -> namespaces for ldconfig -> join the container's mount
 *   namespace -> device nodes -> bind mounts -> symlinks -> ld cache ->
 *   allow the devices in the cgroup, last.
 *
 * Security: the hook runs as root against a possibly hostile image.
 * Every container path is resolved below an O_PATH fd of the rootfs
 * (xc_resolve_in_root; the creating walk below has the same rules:
 * absolute symlinks restart at the root, ".." stops there, > 40 links is
 * ELOOP), every creation is an *at() call relative to a resolved parent,
 * mounts go onto /proc/self/fd/N of resolved fds, mount sources must be
 * root-owned (and, except device nodes, not group/other-writable), and the
 * image's ldconfig runs confined (xc_spawn_confined).
 *
 * Every change is journalled (undo.h).  Anything the plan finds that the
 * Python hook handles differently or reports is XF_DEFER before anything
 * is touched; a failing step rolls the journal back, returns to the
 * hook's own mount namespace and defers (the Python hook retries and
 * words the error); a failed rollback is XF_FAIL. */
#include "inject.h"
#include "cgroup.h"
#include "undo.h"
#include "xc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define LDCONF "/etc/ld.so.conf.d/00-xpu-cdi.conf"
#define LDCONF_HEADER "# written by xpu-cdi-hook update-ldcache\n"
#define LDCONFIG_ENV "PATH=/usr/sbin:/usr/bin:/sbin:/bin" /* ldcache.ENV */
#define LDCONFIG_TIMEOUT_MS 30000                        /* ldcache.TIMEOUT */
#define LDCONFIG_OUT 4096                                /* as resolver.spawn_confined */
#define SPAWN_MAX_ARGC 127 /* xc_spawn_confined takes argc + 1 <= 128 */
#define MAX_DEV_MAJOR 0xfffu   /* the kernel's dev_t: 12-bit major... */
#define MAX_DEV_MINOR 0xfffffu /* ...20-bit minor */
#define MAX_MAP_BYTES 65536

static const char *const LDCONFIG[] = {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/bin/ldconfig",
                                       "/usr/bin/ldconfig"};
static const char TOOLS_NOTE[] = "only xpu-cdi-hook's update-ldcache and create-symlinks are run "
                                 "in-process on the prestart path";

/* ------------------------------------------------------------------ */
/* The plan (plan.py): the edits checked and completed, nothing touched */
/* ------------------------------------------------------------------ */

struct pnode {
    const char *path, *host;
    char kind;                 /* 'c', 'u' or 'b' */
    unsigned major, minor;
    mode_t mode;               /* permission bits (fileMode or 0666) */
    int chown;                 /* uid or gid given */
    long long uid, gid;        /* -1: leave as is */
};

struct pmount {
    const char *host, *target;
    unsigned long flags;
    int recursive;
};

struct plink {
    const char *target, *link;
};

struct plan {
    struct pnode *nodes;
    size_t nnodes;
    struct pmount *mounts;
    size_t nmounts;
    const char **folders;      /* de-duplicated, in order */
    size_t nfolders;
    struct plink *links;
    size_t nlinks, caplinks;
    const char **notes;        /* hook notes, then the env note */
    size_t nnotes;
    struct xf_rule *rules;
    size_t nrules;
};

/* Python's repr() of a str, for the notes; -1 for text with non-ASCII
 * characters (whose repr depends on Unicode tables: not worth porting). */
static int py_repr(struct xf_buf *b, const char *s)
{
    char quote = (strchr(s, '\'') && !strchr(s, '"')) ? '"' : '\'';

    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p >= 0x80)
            return -1;
    xf_buf_add(b, &quote, 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == (unsigned char)quote || *p == '\\')
            xf_buf_addf(b, "\\%c", *p);
        else if (*p == '\t')
            xf_buf_adds(b, "\\t");
        else if (*p == '\n')
            xf_buf_adds(b, "\\n");
        else if (*p == '\r')
            xf_buf_adds(b, "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            xf_buf_addf(b, "\\x%02x", *p);
        else
            xf_buf_add(b, (const char *)p, 1);
    }
    xf_buf_add(b, &quote, 1);
    return 0;
}

/* rootfs.components() accepts it and it names something below the root:
 * absolute, no "." / ".." component, at least one component, < PATH_MAX. */
static int good_cpath(const char *p)
{
    int parts = 0;

    if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX)
        return 0;
    while (*p) {
        size_t len;
        while (*p == '/')
            p++;
        len = strcspn(p, "/");
        if (len == 0)
            break;
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        parts++;
        p += len;
    }
    return parts > 0;
}

/* The spec entry's integer member agrees with what request.c parsed:
 * absent and not present, or an integer of that value.  null, floats,
 * booleans and strings are refused (Python's setdefault and `or` treat
 * them in ways not worth porting). */
static int int_member_ok(const fj *obj, const char *key, int present, long long value)
{
    const fj *m;

    if (obj == NULL)
        return 1;
    m = fj_get(obj, key);
    if (m == NULL)
        return !present;
    return present && m->type == FJ_NUMBER && m->is_int && m->num == value;
}

/* The string member agrees: absent or null and want NULL, or that text. */
static int str_member_ok(const fj *obj, const char *key, const char *want)
{
    const fj *m;

    if (obj == NULL)
        return 1;
    m = fj_get(obj, key);
    if (m == NULL || m->type == FJ_NULL)
        return want == NULL;
    return want != NULL && fj_str(m) != NULL && strcmp(fj_str(m), want) == 0;
}

/* The array-of-strings member agrees (absent or null: empty). */
static int strs_member_ok(const fj *obj, const char *key, const char *const *want, size_t n)
{
    const fj *m;

    if (obj == NULL)
        return 1;
    m = fj_get(obj, key);
    if (m == NULL || m->type == FJ_NULL)
        return n == 0;
    if (m->type != FJ_ARRAY || m->n != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fj_str(m->items[i]) == NULL || strcmp(fj_str(m->items[i]), want[i]) != 0)
            return 0;
    return 1;
}

static int plan_node(const struct xf_node *in, struct pnode *out, struct xf_rule *rule, int *has_rule)
{
    const fj *j = in->json;
    const char *perms = "rwm";
    char kind = in->type;
    long long major = in->major, minor = in->minor, mode;
    int numbers = (in->present & XF_HAS_MAJOR) && (in->present & XF_HAS_MINOR);
    size_t k = 0;

    if (!good_cpath(in->path))
        return xf_say(XF_DEFER, "device node path %s: not a plain absolute path", in->path ? in->path : "(none)");
    if (!int_member_ok(j, "major", in->present & XF_HAS_MAJOR, in->major) ||
        !int_member_ok(j, "minor", in->present & XF_HAS_MINOR, in->minor) ||
        !int_member_ok(j, "fileMode", in->present & XF_HAS_MODE, in->mode) ||
        !int_member_ok(j, "uid", in->present & XF_HAS_UID, in->uid) ||
        !int_member_ok(j, "gid", in->present & XF_HAS_GID, in->gid))
        return xf_say(XF_DEFER, "device node %s: a number field that is not a plain integer", in->path);
    if (j != NULL) {
        /* n.get("type") or None; n.setdefault("hostPath", path); permissions or "rwm" */
        const fj *t = fj_get(j, "type"), *h = fj_get(j, "hostPath"), *p = fj_get(j, "permissions");
        char jkind = 0;
        if (t != NULL && t->type != FJ_NULL) {
            if (fj_str(t) == NULL || t->len > 1)
                return xf_say(XF_DEFER, "device node %s: unusual type", in->path);
            jkind = t->str[0];
        }
        if (jkind != kind)
            return xf_say(XF_DEFER, "device node %s: type not as parsed", in->path);
        if (h != NULL && (fj_str(h) == NULL || h->len == 0 || in->host_path == NULL ||
                          strcmp(in->host_path, fj_str(h)) != 0))
            return xf_say(XF_DEFER, "device node %s: unusual hostPath", in->path);
        if (h == NULL && in->host_path != NULL)
            return xf_say(XF_DEFER, "device node %s: hostPath not as parsed", in->path);
        if (p != NULL && p->type != FJ_NULL && (fj_str(p) == NULL || !str_member_ok(j, "permissions", in->permissions)))
            return xf_say(XF_DEFER, "device node %s: unusual permissions", in->path);
    }
    if (in->permissions != NULL && in->permissions[0] != '\0')
        perms = in->permissions;
    if (strspn(perms, "rwm") != strlen(perms))
        return xf_say(XF_DEFER, "device node %s: permissions %s", in->path, perms);
    if (kind == 'p')
        return xf_say(XF_DEFER, "device node %s: fifo nodes are left to the Python hook", in->path);
    if (kind != 0 && kind != 'c' && kind != 'u' && kind != 'b')
        return xf_say(XF_DEFER, "device node %s: type %c", in->path, kind);

    out->path = in->path;
    out->host = in->host_path && in->host_path[0] ? in->host_path : in->path;
    if (!numbers) {
        /* resolver.stat_nodes: stat(2), following links, in the runtime's namespace */
        struct stat st;
        char host_kind;
        if (stat(out->host, &st) != 0)
            return xf_say(XF_DEFER, "device node %s: host node %s: %s", in->path, out->host, strerror(errno));
        if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
            return xf_say(XF_DEFER, "device node %s: host node %s is not a device", in->path, out->host);
        host_kind = S_ISCHR(st.st_mode) ? 'c' : 'b';
        if (kind == 0)
            kind = host_kind;
        else if ((kind == 'b') != (host_kind == 'b'))
            return xf_say(XF_DEFER, "device node %s: type %c but host node %s is %c", in->path, kind,
                          out->host, host_kind);
        major = major(st.st_rdev);
        minor = minor(st.st_rdev);
        mode = (in->present & XF_HAS_MODE) ? in->mode : (long long)(st.st_mode & 07777);
    } else {
        mode = (in->present & XF_HAS_MODE) ? in->mode : 0666;
    }
    if (kind == 0)
        kind = 'c';
    if (major < 0 || major > MAX_DEV_MAJOR || minor < 0 || minor > MAX_DEV_MINOR)
        return xf_say(XF_DEFER, "device node %s: numbers %lld:%lld out of range", in->path, major, minor);
    if (((in->present & XF_HAS_UID) && (in->uid < 0 || in->uid >= 0xffffffffLL)) ||
        ((in->present & XF_HAS_GID) && (in->gid < 0 || in->gid >= 0xffffffffLL)))
        return xf_say(XF_DEFER, "device node %s: uid/gid out of range", in->path);
    out->kind = kind;
    out->major = (unsigned)major;
    out->minor = (unsigned)minor;
    out->mode = (mode_t)((mode ? mode : 0666) & 07777); /* int(fileMode or 0o666) & 0o7777 */
    out->chown = (in->present & (XF_HAS_UID | XF_HAS_GID)) != 0;
    out->uid = (in->present & XF_HAS_UID) ? in->uid : -1;
    out->gid = (in->present & XF_HAS_GID) ? in->gid : -1;

    /* cgroup.rule_of: 'u' is 'c', access in "rwm" order */
    rule->type = kind == 'b' ? 'b' : 'c';
    rule->major = major;
    rule->minor = minor;
    for (const char *c = "rwm"; *c; c++)
        if (strchr(perms, *c))
            rule->access[k++] = *c;
    rule->access[k] = '\0';
    *has_rule = 1;
    return XF_OK;
}

/* plan._plan_mount */
static int plan_mount(const struct xf_mount *m, struct pmount *out)
{
    static const struct {
        const char *name;
        unsigned long flag;
    } known[] = {{"ro", MS_RDONLY}, {"nosuid", MS_NOSUID}, {"nodev", MS_NODEV}, {"noexec", MS_NOEXEC},
                 {"rw", 0}, {"bind", 0}, {"rbind", 0}};
    static const char *const ignored[] = {"private", "rprivate", "slave", "rslave", "shared", "rshared",
                                          "unbindable", "runbindable", "relatime", "norelatime",
                                          "strictatime", "noatime", "atime", "suid", "dev", "exec"};
    const char *host = m->host_path, *target = m->container_path;
    int bind = m->type && (strcmp(m->type, "bind") == 0 || strcmp(m->type, "rbind") == 0);
    int rbind = m->type && strcmp(m->type, "rbind") == 0;

    if (host == NULL || host[0] != '/' || strlen(host) >= PATH_MAX || !good_cpath(target))
        return xf_say(XF_DEFER, "mount %s -> %s: not plain absolute paths", host ? host : "(none)",
                      target ? target : "(none)");
    if (!str_member_ok(m->json, "type", m->type) ||
        !strs_member_ok(m->json, "options", m->options, m->noptions))
        return xf_say(XF_DEFER, "mount %s -> %s: type/options not as parsed", host, target);
    out->host = host;
    out->target = target;
    out->flags = 0;
    for (size_t i = 0; i < m->noptions; i++) {
        const char *opt = m->options[i];
        int found = 0;
        if (strcmp(opt, "bind") == 0)
            bind = 1;
        if (strcmp(opt, "rbind") == 0)
            bind = rbind = 1;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]) && !found; k++)
            if (strcmp(opt, known[k].name) == 0) {
                out->flags |= known[k].flag;
                found = 1;
            }
        for (size_t k = 0; k < sizeof(ignored) / sizeof(ignored[0]) && !found; k++)
            found = strcmp(opt, ignored[k]) == 0;
        if (!found)
            return xf_say(XF_DEFER, "mount %s -> %s: option %s", host, target, opt);
    }
    if (!bind)
        return xf_say(XF_DEFER, "mount %s -> %s: not a bind mount", host, target);
    out->recursive = rbind;
    return XF_OK;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void add_link(struct plan *p, const char *target, const char *link)
{
    if (p->nlinks == p->caplinks) {
        p->caplinks = p->caplinks ? 2 * p->caplinks : 8;
        p->links = xf_realloc(p->links, p->caplinks * sizeof(*p->links));
    }
    p->links[p->nlinks].target = target;
    p->links[p->nlinks++].link = link;
}

/* plan._plan_hook with main.parse_tool_args and links.parse */
static int plan_hook(const struct xf_hook *h, struct plan *p, size_t max_folders)
{
    const char *sub = h->nargs > 1 ? h->args[1] : "", *opt;
    int ours, ldcache;
    size_t nvalues = 0;

    if (h->path == NULL)
        return xf_say(XF_DEFER, "spec hook without a path");
    if (!str_member_ok(h->json, "path", h->path) || !strs_member_ok(h->json, "args", h->args, h->nargs))
        return xf_say(XF_DEFER, "spec hook %s: path/args not as parsed", h->path);
    ours = strncmp(base_name(h->path), "xpu-cdi", 7) == 0 ||
           (h->nargs > 0 && strncmp(base_name(h->args[0]), "xpu-cdi", 7) == 0);
    ldcache = strcmp(sub, "update-ldcache") == 0;
    if (!ours || (!ldcache && strcmp(sub, "create-symlinks") != 0)) {
        struct xf_buf b = {0};
        xf_buf_adds(&b, "spec hook ");
        if (py_repr(&b, h->path) != 0)
            return xf_say(XF_DEFER, "spec hook path with non-ASCII text");
        xf_buf_addf(&b, " %s not run: %s", sub, TOOLS_NOTE);
        p->notes[p->nnotes++] = b.data;
        return XF_OK;
    }
    /* main._split: "--opt VALUE" / "--opt=VALUE"; anything else is an error */
    opt = ldcache ? "--folder" : "--link";
    for (size_t i = 2; i < h->nargs; i++) {
        const char *arg = h->args[i], *eq = strchr(arg, '='), *value;
        size_t namelen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (namelen != strlen(opt) || strncmp(arg, opt, namelen) != 0)
            return xf_say(XF_DEFER, "spec hook %s: unexpected argument %s", sub, arg);
        if (eq)
            value = eq + 1;
        else if (i + 1 < h->nargs)
            value = h->args[++i];
        else
            return xf_say(XF_DEFER, "spec hook %s: %s needs a value", sub, opt);
        nvalues++;
        if (ldcache) {
            int seen = 0;
            if (value[0] != '/') /* ldcache.update's check */
                return xf_say(XF_DEFER, "update-ldcache: --folder %s is not absolute", value);
            for (size_t f = 0; f < p->nfolders && !seen; f++)
                seen = strcmp(p->folders[f], value) == 0;
            if (!seen) {
                if (p->nfolders >= max_folders)
                    return xf_say(XF_DEFER, "update-ldcache: too many folders");
                p->folders[p->nfolders++] = value;
            }
        } else {
            const char *sep = strstr(value, "::");
            if (sep == NULL || sep == value || !good_cpath(sep + 2))
                return xf_say(XF_DEFER, "create-symlinks: --link %s", value);
            add_link(p, xf_strndup(value, (size_t)(sep - value)), sep + 2);
        }
    }
    if (nvalues == 0)
        return xf_say(XF_DEFER, "spec hook %s: needs at least one %s", sub, opt);
    return XF_OK;
}

static int make_plan(const struct xf_edits *e, struct plan *p)
{
    int rv;
    size_t max_folders = SPAWN_MAX_ARGC - 1;

    memset(p, 0, sizeof(*p));
    p->nodes = xf_alloc(e->nnodes * sizeof(*p->nodes));
    p->rules = xf_alloc(e->nnodes * sizeof(*p->rules));
    for (size_t i = 0; i < e->nnodes; i++) {
        int has_rule = 0;
        if ((rv = plan_node(&e->nodes[i], &p->nodes[p->nnodes], &p->rules[p->nrules], &has_rule)) != XF_OK)
            return rv;
        p->nnodes++;
        p->nrules += (size_t)has_rule;
    }
    p->mounts = xf_alloc(e->nmounts * sizeof(*p->mounts));
    for (size_t i = 0; i < e->nmounts; i++)
        if ((rv = plan_mount(&e->mounts[i], &p->mounts[p->nmounts++])) != XF_OK)
            return rv;
    p->notes = xf_alloc((e->nhooks + 2) * sizeof(*p->notes));
    p->folders = xf_alloc(max_folders * sizeof(*p->folders));
    for (size_t i = 0; i < e->nhooks; i++)
        if ((rv = plan_hook(&e->hooks[i], p, max_folders)) != XF_OK)
            return rv;
    if (e->nenv > 0)
        p->notes[p->nnotes++] = xf_printf("%zu env edit(s) not applied: a hook cannot change the container's "
                                          "environment (use CDI mode or the xpu-container-runtime wrapper)",
                                          e->nenv);
    return XF_OK;
}

/* ------------------------------------------------------------------ */
/* The rootfs (rootfs.py): paths resolved and created inside it        */
/* ------------------------------------------------------------------ */

struct inj {
    int rootfd;                /* O_PATH of the rootfs (container's mount namespace) */
    struct xf_undo undo;
    int userns;                /* create as the container's root (as_owner) */
    unsigned owner_uid, owner_gid, euid, egid;
    int fsids_lost;            /* the fs ids could not be switched back: stop */
    const char *leaked;        /* a change made that the journal cannot take back */
};

static const char *fd_path(char buf[32], int fd)
{
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
    return buf;
}

static int undo_unlink(const long *a)
{
    return unlinkat((int)a[0], (const char *)(intptr_t)a[1], (int)a[2]) == 0 ? 0 : -errno;
}

static int undo_umount(const long *a)
{
    char p[32];
    return xc_umount(fd_path(p, (int)a[0]), MNT_DETACH);
}

/* Journal the removal of name (just made in dirfd): a dup of dirfd is
 * kept for the undo step.  If even that fails, remove it now. */
static int journal_unlink(struct inj *x, int dirfd, const char *name, int flags, const char *what)
{
    int keep = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);

    if (keep < 0) {
        int err = errno;
        if (unlinkat(dirfd, name, flags) != 0)
            x->leaked = xf_printf("%s (cannot be journalled: %s)", what, strerror(err));
        return -err;
    }
    xf_undo_keep_fd(&x->undo, keep);
    xf_undo_push(&x->undo, what, undo_unlink, keep, (long)(intptr_t)xf_strdup(name), flags, 0);
    return 0;
}

enum mk { MK_DIR, MK_FILE, MK_NODE, MK_LINK };

/* Root.as_owner: make name in dirfd with the fs ids of the container's
 * root when in a user namespace.  0 (MK_FILE: the open fd) or -errno. */
static int create_as_owner(struct inj *x, enum mk what, int dirfd, const char *name, mode_t mode, dev_t dev,
                           const char *target)
{
    int rv, err;

    if (x->userns && (rv = xc_setfsids(x->owner_uid, x->owner_gid)) != 0)
        return rv;
    switch (what) {
    case MK_DIR:
        rv = mkdirat(dirfd, name, mode);
        break;
    case MK_FILE:
        rv = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        break;
    case MK_NODE:
        rv = mknodat(dirfd, name, mode, dev);
        break;
    default:
        rv = symlinkat(target, dirfd, name);
        break;
    }
    err = errno;
    if (x->userns && xc_setfsids(x->euid, x->egid) != 0)
        x->fsids_lost = 1;
    return rv < 0 ? -err : rv;
}

/* Root._creator: a missing component of cpath, made in dirfd. */
static int create_missing(struct inj *x, int dirfd, const char *name, int last, char leaf, const char *cpath)
{
    int rv;

    if (last && leaf == 'f') {
        rv = create_as_owner(x, MK_FILE, dirfd, name, 0644, 0, NULL);
        if (rv < 0)
            return rv;
        close(rv);
        rv = journal_unlink(x, dirfd, name, 0, xf_printf("remove file '%s' made for '%s'", name, cpath));
    } else {
        rv = create_as_owner(x, MK_DIR, dirfd, name, 0755, 0, NULL);
        if (rv < 0)
            return rv;
        rv = journal_unlink(x, dirfd, name, AT_REMOVEDIR,
                            xf_printf("remove directory '%s' made for '%s'", name, cpath));
    }
    return x->fsids_lost ? -EPERM : rv;
}

/* The walk's creator for ensure (Root._creator bound to one cpath). */
struct creating {
    struct inj *x;
    const char *cpath;
    char leaf;
};

static int create_cb(void *ctx, int dirfd, const char *name, int last)
{
    struct creating *c = ctx;

    return create_missing(c->x, dirfd, name, last, c->leaf, c->cpath);
}

/* Root.ensure: an O_PATH fd of cpath, creating what is missing (dirs
 * 0755, a last component 'd' a dir or 'f' an empty 0644 file); an
 * existing last component of the wrong kind is an error. */
static int ensure(struct inj *x, const char *cpath, char leaf, int *fd_out)
{
    struct stat st;
    int fd, rv = xc_resolve_in_root(x->rootfd, cpath, 0, &fd);

    if (rv == -ENOENT) { /* _inroot.walk with create: made relative to each resolved parent */
        struct creating c = {x, cpath, leaf};
        rv = xc_walk_in_root(x->rootfd, cpath, 0, create_cb, &c, &fd);
    }
    if (rv != 0)
        return xf_say(XF_DEFER, "resolve %s in the rootfs: %s", cpath, strerror(-rv));
    if (fstat(fd, &st) != 0) {
        rv = errno;
        close(fd);
        return xf_say(XF_DEFER, "fstat %s: %s", cpath, strerror(rv));
    }
    if ((S_ISDIR(st.st_mode) != 0) != (leaf == 'd')) {
        close(fd);
        return xf_say(XF_DEFER, "container path %s exists in the image but is not %s", cpath,
                      leaf == 'd' ? "a directory" : "a file (the source is a file)");
    }
    *fd_out = fd;
    return XF_OK;
}

/* Root.parent_of: (fd of the parent directory, made if missing; last
 * component) of a good_cpath() path. */
static int parent_of(struct inj *x, const char *cpath, int *fd_out, const char **name)
{
    struct xf_buf parent = {0};
    const char *s = cpath, *last = NULL;
    size_t lastlen = 0;

    xf_buf_add(&parent, "", 0);
    while (*s) {
        size_t len;
        while (*s == '/')
            s++;
        len = strcspn(s, "/");
        if (len == 0)
            break;
        if (last != NULL) {
            xf_buf_add(&parent, "/", 1);
            xf_buf_add(&parent, last, lastlen);
        }
        last = s;
        lastlen = len;
        s += len;
    }
    if (last == NULL)
        return xf_say(XF_DEFER, "container path %s names the root itself", cpath);
    if (parent.len == 0)
        xf_buf_add(&parent, "/", 1);
    *name = xf_strndup(last, lastlen);
    return ensure(x, parent.data, 'd', fd_out);
}

/* ------------------------------------------------------------------ */
/* Nodes and mounts (inject.py)                                        */
/* ------------------------------------------------------------------ */

/* _open_source: O_PATH fd of a mount source (host path, links followed),
 * root-owned and, unless writable_ok (device nodes), not group/other-writable. */
static int open_source(const char *host, int writable_ok, int *fd_out)
{
    struct stat st;
    int fd = open(host, O_PATH | O_CLOEXEC), err;

    if (fd < 0)
        return xf_say(XF_DEFER, "mount source %s: %s", host, strerror(errno));
    if (fstat(fd, &st) != 0) {
        err = errno;
        close(fd);
        return xf_say(XF_DEFER, "mount source %s: %s", host, strerror(err));
    }
    if (st.st_uid != 0) {
        close(fd);
        return xf_say(XF_DEFER, "mount source %s is owned by uid %u, not root", host, (unsigned)st.st_uid);
    }
    if (!writable_ok && (st.st_mode & 022)) {
        close(fd);
        return xf_say(XF_DEFER, "mount source %s is group- or world-writable (mode %o)", host,
                      (unsigned)(st.st_mode & 07777));
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
        return xf_say(XF_DEFER, "statvfs of the mount source: %s", strerror(errno));
    *out = 0;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (sv.f_flag & map[i].st)
            *out |= map[i].ms;
    return XF_OK;
}

/* _bind: bind src onto cpath (made as leaf 'd'/'f' if missing), then
 * remount with flags.  *made 0 when cpath already shows src. */
static int bind_at(struct inj *x, int src, const char *cpath, char leaf, unsigned long flags, int recursive,
                   int *made)
{
    struct stat a, b;
    char sp[32], tp[32];
    int target, top, rv;

    *made = 0;
    if ((rv = ensure(x, cpath, leaf, &target)) != XF_OK)
        return rv;
    if (fstat(target, &a) != 0 || fstat(src, &b) != 0) {
        rv = errno;
        close(target);
        return xf_say(XF_DEFER, "fstat: %s", strerror(rv));
    }
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        close(target);
        return XF_OK;
    }
    rv = xc_mount(fd_path(sp, src), fd_path(tp, target), NULL, MS_BIND | (recursive ? MS_REC : 0), NULL);
    close(target);
    if (rv != 0)
        return xf_say(XF_DEFER, "mount: %s", strerror(-rv));
    /* the O_PATH fd we mounted on names the covered inode: resolve again
     * to reach the new mount, and check it is what we bound */
    rv = xc_resolve_in_root(x->rootfd, cpath, 0, &top);
    if (rv != 0) {
        x->leaked = xf_printf("the bind mount on '%s' (cannot find it again: %s)", cpath, strerror(-rv));
        return xf_say(XF_DEFER, "resolve %s after mounting: %s", cpath, strerror(-rv));
    }
    /* journal the unmount only of what is our mount: unmounting whatever
     * a raced path leads to could take down a mount the runtime made */
    if (fstat(top, &a) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        close(top);
        x->leaked = xf_printf("the bind mount on '%s' (not where it was made)", cpath);
        return xf_say(XF_DEFER, "the bind mount is not where it was made (raced?)");
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
        if ((rv = xc_mount(NULL, fd_path(tp, top), NULL, MS_REMOUNT | MS_BIND | flags | have, NULL)) != 0)
            return xf_say(XF_DEFER, "remount: %s", strerror(-rv));
    }
    *made = 1;
    return XF_OK;
}

/* make_node: mknod (as the container's root owns it), or bind the host
 * node (user namespace, or mknod refused); *how "mknod" / "bind" / "exists". */
static int make_node(struct inj *x, const struct pnode *n, int bind, const char **how)
{
    dev_t rdev = makedev(n->major, n->minor);
    mode_t fmt = n->kind == 'b' ? S_IFBLK : S_IFCHR;
    struct stat st;
    int parent, src, rv, made;
    const char *name;

    if (!bind) {
        if ((rv = parent_of(x, n->path, &parent, &name)) != XF_OK)
            return rv;
        rv = create_as_owner(x, MK_NODE, parent, name, fmt | n->mode, rdev, NULL);
        if (rv == -EEXIST) {
            if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rv = errno;
                close(parent);
                return xf_say(XF_DEFER, "stat: %s", strerror(rv));
            }
            close(parent);
            if ((st.st_mode & S_IFMT) == fmt && st.st_rdev == rdev) {
                *how = "exists";
                return x->fsids_lost ? xf_say(XF_DEFER, "cannot restore the filesystem ids") : XF_OK;
            }
            return xf_say(XF_DEFER, "already exists in the container and is not %c %u:%u", n->kind, n->major,
                          n->minor);
        }
        if (rv == -EPERM || rv == -EACCES) { /* e.g. a user namespace: bind the host node instead */
            close(parent);
            if (x->fsids_lost)
                return xf_say(XF_DEFER, "cannot restore the filesystem ids");
            bind = 1;
        } else if (rv != 0) {
            close(parent);
            return xf_say(XF_DEFER, "mknod: %s", strerror(-rv));
        } else {
            rv = journal_unlink(x, parent, name, 0, xf_printf("remove node '%s'", n->path));
            if (rv == 0 && x->fsids_lost)
                rv = -EPERM;
            if (rv == 0 && n->chown &&
                fchownat(parent, name, (uid_t)n->uid, (gid_t)n->gid, AT_SYMLINK_NOFOLLOW) != 0)
                rv = -errno;
            close(parent);
            if (rv != 0)
                return xf_say(XF_DEFER, "%s", strerror(-rv));
            *how = "mknod";
            return XF_OK;
        }
    }
    if ((rv = open_source(n->host, 1, &src)) != XF_OK)
        return rv;
    if (fstat(src, &st) != 0 || (st.st_mode & S_IFMT) != fmt || st.st_rdev != rdev) {
        close(src);
        return xf_say(XF_DEFER, "host node %s is not %c %u:%u", n->host, n->kind, n->major, n->minor);
    }
    rv = bind_at(x, src, n->path, 'f', MS_NOSUID, 0, &made);
    close(src);
    *how = "bind";
    return rv;
}

/* links.create: each link; an existing link with the same target is fine. */
static int make_links(struct inj *x, const struct plan *p, size_t *made)
{
    char current[PATH_MAX + 1];

    for (size_t i = 0; i < p->nlinks; i++) {
        const char *target = p->links[i].target, *link = p->links[i].link, *name;
        int parent, rv;

        if ((rv = parent_of(x, link, &parent, &name)) != XF_OK)
            return rv;
        rv = create_as_owner(x, MK_LINK, parent, name, 0, 0, target);
        if (rv == -EEXIST) {
            ssize_t n = readlinkat(parent, name, current, sizeof(current));
            close(parent);
            if (x->fsids_lost)
                return xf_say(XF_DEFER, "cannot restore the filesystem ids");
            if (n < 0 || (size_t)n != strlen(target) || memcmp(current, target, (size_t)n) != 0)
                return xf_say(XF_DEFER, "create-symlinks: %s already exists in the container and is not a link "
                              "to %s", link, target);
            continue;
        }
        if (rv == 0) {
            rv = journal_unlink(x, parent, name, 0, xf_printf("remove link '%s'", link));
            if (rv == 0 && x->fsids_lost)
                rv = -EPERM;
            if (rv == 0)
                (*made)++;
        }
        close(parent);
        if (rv != 0)
            return xf_say(XF_DEFER, "create-symlinks: cannot create %s: %s", link, strerror(-rv));
    }
    return XF_OK;
}

/* ------------------------------------------------------------------ */
/* ldcache.py                                                           */
/* ------------------------------------------------------------------ */

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ldcache._open_existing: our entry from an earlier start, opened for
 * rewriting only when it is a regular file.  The image decides what is
 * there: a device node (the host's disk, a watchdog -- even open(2) of
 * those acts on the host, and the hook is root in the host's device
 * cgroup), a fifo (open blocks), a symlink.  So: an O_PATH fd (opens
 * nothing), fstat it, and reopen that very inode through /proc/self/fd (a
 * rename after the check cannot redirect the open).  fd, -ELOOP (a
 * symlink), -NOT_REGULAR, or -errno. */
#define NOT_REGULAR 1000 /* not an errno: a code of its own */
static int open_existing_conf(int parent, const char *name)
{
    struct stat st;
    char p[32];
    int path_fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd, err;

    if (path_fd < 0)
        return -errno;
    if (fstat(path_fd, &st) != 0) {
        err = errno;
        close(path_fd);
        return -err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(path_fd);
        return S_ISLNK(st.st_mode) ? -ELOOP : -NOT_REGULAR;
    }
    fd = open(fd_path(p, path_fd), O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    err = errno;
    close(path_fd);
    return fd < 0 ? -err : fd;
}

/* ldcache.write_conf: our ld.so.conf.d entry, never through a symlink. */
static int write_conf(struct inj *x, const char *const *dirs, size_t ndirs)
{
    struct xf_buf text = {0};
    const char *name;
    int parent, fd, rv, created = 1;

    if ((rv = parent_of(x, LDCONF, &parent, &name)) != XF_OK)
        return rv;
    fd = create_as_owner(x, MK_FILE, parent, name, 0644, 0, NULL);
    if (fd == -EEXIST) { /* ours from an earlier start of this container */
        created = 0;
        fd = open_existing_conf(parent, name);
    }
    if (fd < 0) {
        close(parent);
        if (fd == -ELOOP)
            return xf_say(XF_DEFER, "%s in the image is a symlink", LDCONF);
        if (fd == -NOT_REGULAR)
            return xf_say(XF_DEFER, "%s in the image is not a regular file", LDCONF);
        return xf_say(XF_DEFER, "cannot write %s in the container: %s", LDCONF, strerror(-fd));
    }
    rv = created ? journal_unlink(x, parent, name, 0, "remove '" LDCONF "'") : 0;
    close(parent);
    if (rv == 0 && x->fsids_lost)
        rv = -EPERM;
    xf_buf_adds(&text, LDCONF_HEADER);
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&text, "%s%s", i ? "\n" : "", dirs[i]);
    xf_buf_adds(&text, "\n");
    if (rv == 0)
        rv = write_all(fd, text.data, text.len);
    close(fd);
    if (rv != 0)
        return xf_say(XF_DEFER, "cannot write %s in the container: %s", LDCONF, strerror(-rv));
    return XF_OK;
}

/* ldcache.update: the image's ldconfig run confined on the folders that exist. */
static int update_ldcache(struct inj *x, const struct plan *p, const int *nsfds, const int *nstypes, size_t nns,
                          const char **note)
{
    const char *ldconfig = NULL, **dirs = xf_alloc(p->nfolders * sizeof(*dirs));
    struct xf_buf argv = {0}, msg = {0};
    char root[32], out[LDCONFIG_OUT];
    size_t ndirs = 0;
    int rv, status, code, fd;
    struct stat st;

    for (size_t i = 0; i < sizeof(LDCONFIG) / sizeof(LDCONFIG[0]) && ldconfig == NULL; i++) {
        if (xc_resolve_in_root(x->rootfd, LDCONFIG[i], 0, &fd) != 0)
            continue;
        rv = fstat(fd, &st);
        close(fd);
        if (rv != 0)
            return xf_say(XF_DEFER, "fstat %s: %s", LDCONFIG[i], strerror(errno));
        if (S_ISREG(st.st_mode) && (st.st_mode & 0111))
            ldconfig = LDCONFIG[i];
    }
    if (ldconfig == NULL) {
        *note = "no ldconfig in the image: ld cache left alone";
        return XF_OK;
    }
    for (size_t i = 0; i < p->nfolders; i++) { /* folders are de-duplicated already */
        if (xc_resolve_in_root(x->rootfd, p->folders[i], 0, &fd) != 0)
            continue;
        rv = fstat(fd, &st);
        close(fd);
        if (rv != 0)
            return xf_say(XF_DEFER, "fstat %s: %s", p->folders[i], strerror(errno));
        if (S_ISDIR(st.st_mode))
            dirs[ndirs++] = p->folders[i];
    }
    if (ndirs == 0) {
        *note = "none of the library folders exist in the container: ld cache left alone";
        return XF_OK;
    }
    if ((rv = write_conf(x, dirs, ndirs)) != XF_OK)
        return rv;
    xf_buf_add(&argv, ldconfig, strlen(ldconfig) + 1);
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_add(&argv, dirs[i], strlen(dirs[i]) + 1);
    rv = xc_spawn_confined(fd_path(root, x->rootfd), argv.data, 1 + ndirs, LDCONFIG_ENV, 1, nsfds, nstypes, nns,
                           LDCONFIG_TIMEOUT_MS, out, sizeof(out), &status);
    if (rv != 0)
        return xf_say(XF_DEFER, "cannot run the image's %s: %s", ldconfig, strerror(-rv));
    code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
    if (code != 0) {
        /* the last non-empty line of its output, as Python's strip().splitlines()[-1] */
        size_t end = strlen(out), start;
        while (end > 0 && strchr(" \t\r\n\v\f", out[end - 1]))
            end--;
        start = end;
        while (start > 0 && out[start - 1] != '\n' && out[start - 1] != '\r')
            start--;
        if (end == start)
            return xf_say(XF_DEFER, "the image's %s exited with %d: no output", ldconfig, code);
        return xf_say(XF_DEFER, "the image's %s exited with %d: %.*s", ldconfig, code,
                      (int)(end - start), out + start);
    }
    xf_buf_adds(&msg, "ld cache updated for ");
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&msg, "%s%s", i ? ", " : "", dirs[i]);
    *note = msg.data;
    return XF_OK;
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
        xf_say(XF_DEFER, "container process %d: cannot read its %s namespace: %s", pid, name, strerror(errno));
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
        return XF_DEFER;
    if (strlen(text) != len)
        return xf_say(XF_DEFER, "%s: NUL byte", path);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long long v[3];
        int used = 0;
        char *s = line, *end;
        for (int f = 0; f < 3; f++) {
            while (*s == ' ' || *s == '\t')
                s++;
            if (*s < '0' || *s > '9')
                return xf_say(XF_DEFER, "%s: unexpected line", path);
            errno = 0;
            v[f] = strtoull(s, &end, 10);
            if (errno != 0 || v[f] > 0xffffffffULL)
                return xf_say(XF_DEFER, "%s: unexpected line", path);
            s = end;
            used++;
        }
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (*s != '\0' || used != 3)
            return xf_say(XF_DEFER, "%s: unexpected line", path);
        if (v[0] == 0) {
            *out = (unsigned)v[1];
            return XF_OK;
        }
    }
    return xf_say(XF_DEFER, "container process %d: %s 0 is not mapped in its user namespace", pid, kind);
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
            return XF_DEFER;
        if (same)
            continue;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return xf_say(XF_DEFER, "%s: %s", path, strerror(errno));
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
static int inject_in_root(struct inj *x, const struct plan *p, const int *nsfds, const int *nstypes, size_t nns,
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
        const struct pmount *m = &p->mounts[i];
        struct stat st;
        int src, made = 0;
        *step = xf_printf("mount '%s' -> '%s'", m->host, m->target);
        if ((rv = open_source(m->host, 0, &src)) != XF_OK)
            return rv;
        if (fstat(src, &st) != 0) {
            rv = errno;
            close(src);
            return xf_say(XF_DEFER, "fstat: %s", strerror(rv));
        }
        rv = bind_at(x, src, m->target, S_ISDIR(st.st_mode) ? 'd' : 'f', m->flags, m->recursive, &made);
        close(src);
        if (rv != XF_OK)
            return rv;
        *mounted += (size_t)made;
    }
    *step = "symlinks";
    if ((rv = make_links(x, p, links)) != XF_OK)
        return rv;
    if (p->nfolders > 0) {
        *step = "update-ldcache";
        if ((rv = update_ldcache(x, p, nsfds, nstypes, nns, ld_note)) != XF_OK)
            return rv;
    }
    return XF_OK;
}

int xf_inject(const struct xf_container *c, const struct xf_edits *edits, const char **note)
{
    struct plan p;
    struct inj x;
    struct xf_cgroup cg;
    struct xf_buf b = {0};
    int have_cg = 0, rv, same, mnt_back = -1, cwd_back = -1, programs = 0;
    int nsfds[8], nstypes[8];
    size_t nns = 0, counts[4] = {0, 0, 0, 0}, mounted = 0, links = 0;
    const char *step = "opening the container's cgroup", *ld_note = NULL, *failed = NULL;
    mode_t old_umask;

    *note = NULL;
    if ((rv = make_plan(edits, &p)) != XF_OK)
        return rv;
    if (c->pid <= 1)
        return xf_say(XF_DEFER, "OCI state pid %d is not a container process", c->pid);
    if (c->rootfs == NULL || c->rootfs[0] != '/')
        return xf_say(XF_DEFER, "rootfs is not an absolute path");

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
    if ((same = same_ns(c->pid, "user")) < 0) {
        rv = XF_DEFER;
        goto out;
    }
    x.userns = !same;
    if (x.userns && ((rv = root_owner(c->pid, "uid", &x.owner_uid)) != XF_OK ||
                     (rv = root_owner(c->pid, "gid", &x.owner_gid)) != XF_OK))
        goto out;
    if (p.nfolders > 0 && (rv = open_namespaces(c->pid, nsfds, nstypes, &nns)) != XF_OK)
        goto out;

    step = "joining the container's mount namespace";
    if ((same = same_ns(c->pid, "mnt")) < 0) {
        rv = XF_DEFER;
        goto out;
    }
    if (!same) {
        /* keep the way back: a deferral execs the Python hook, which must
         * start where we started (same namespace, same cwd) */
        char path[64];
        mnt_back = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        cwd_back = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (mnt_back < 0 || cwd_back < 0) {
            rv = xf_say(XF_DEFER, "cannot keep the hook's own namespace and cwd: %s", strerror(errno));
            goto out;
        }
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", c->pid);
        if ((rv = xc_setns(path, CLONE_NEWNS)) != 0) {
            rv = xf_say(XF_DEFER, "setns %s: %s", path, strerror(-rv));
            goto out;
        }
    }
    x.rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (x.rootfd < 0) {
        rv = xf_say(XF_DEFER, "rootfs %s: cannot open: %s", c->rootfs, strerror(errno));
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
        char *why = xf_printf("%s: %s", step, xf_reason);
        size_t nfailed = xf_undo_rollback(&x.undo, &failed);
        if (nfailed > 0 || x.leaked != NULL || x.fsids_lost) {
            rv = xf_say(XF_FAIL, "%s (and could not undo: %s%s%s%s)", why, failed ? failed : "",
                        failed && x.leaked ? "; " : "", x.leaked ? x.leaked : "",
                        x.fsids_lost ? " [filesystem ids not restored]" : "");
        } else {
            rv = xf_say(XF_DEFER, "%s", why);
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
