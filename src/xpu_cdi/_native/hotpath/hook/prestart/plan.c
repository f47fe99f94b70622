/* The plan (plan.h).  Host side only: stat(2) of device nodes without
 * numbers, nothing created or changed. */
#include "hook/prestart/plan.h"
#include "hook/update_ldcache.h"
#include "lib/strings.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define PROG_HOOK "xpu-cdi-hook"
#define MAX_DEV_MAJOR 0xfffu   /* the kernel's dev_t: 12-bit major... */
#define MAX_DEV_MINOR 0xfffffu /* ...20-bit minor */

static const char TOOLS_NOTE[] = "only xpu-cdi-hook's update-ldcache and create-symlinks are run "
                                 "in-process on the prestart path";

/* The spec entry's integer member agrees with what registry.c parsed:
 * absent and not present, or an integer of that value.  null, floats,
 * booleans and strings are refused: a broken spec, never read as a
 * default. */
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

static int plan_node(const struct xf_node *in, struct xf_plan_node *out, struct xf_rule *rule, int *has_rule)
{
    const fj *j = in->json;
    const char *perms = "rwm";
    char kind = in->type;
    long long major = in->major, minor = in->minor, mode;
    int numbers = (in->present & XF_HAS_MAJOR) && (in->present & XF_HAS_MINOR), have_host = 0;
    struct stat host;
    size_t k = 0;

    if (!xf_good_cpath(in->path))
        return xf_say(XF_ERR, "device node path '%s' must be a plain absolute path", in->path ? in->path : "(none)");
    if (!int_member_ok(j, "major", in->present & XF_HAS_MAJOR, in->major) ||
        !int_member_ok(j, "minor", in->present & XF_HAS_MINOR, in->minor) ||
        !int_member_ok(j, "fileMode", in->present & XF_HAS_MODE, in->mode) ||
        !int_member_ok(j, "uid", in->present & XF_HAS_UID, in->uid) ||
        !int_member_ok(j, "gid", in->present & XF_HAS_GID, in->gid))
        return xf_say(XF_ERR, "device node '%s': major, minor, fileMode, uid and gid must be integers (regenerate "
                      "the spec with `xpu-cdi generate`)", in->path);
    if (j != NULL) {
        /* type: absent, null or one of c b u p; hostPath: absent (the path itself) or a
         * non-empty path; permissions: absent, null or "" ("rwm") or r, w and m */
        const fj *t = fj_get(j, "type"), *h = fj_get(j, "hostPath"), *p = fj_get(j, "permissions");
        char jkind = 0;
        if (t != NULL && t->type != FJ_NULL) {
            if (fj_str(t) == NULL || t->len > 1)
                return xf_say(XF_ERR, "device node '%s': type must be c, b, u or p", in->path);
            jkind = t->str[0];
        }
        if (jkind != kind)
            return xf_say(XF_ERR, "device node '%s': type must be c, b, u or p", in->path);
        if (h != NULL && (fj_str(h) == NULL || h->len == 0 || in->host_path == NULL ||
                          strcmp(in->host_path, fj_str(h)) != 0))
            return xf_say(XF_ERR, "device node '%s': hostPath must be a non-empty path", in->path);
        if (h == NULL && in->host_path != NULL)
            return xf_say(XF_ERR, "device node '%s': hostPath must be a non-empty path", in->path);
        if (p != NULL && p->type != FJ_NULL && (fj_str(p) == NULL || !str_member_ok(j, "permissions", in->permissions)))
            return xf_say(XF_ERR, "device node '%s': permissions must be a string of r, w and m", in->path);
    }
    if (in->permissions != NULL && in->permissions[0] != '\0')
        perms = in->permissions;
    if (strspn(perms, "rwm") != strlen(perms))
        return xf_say(XF_ERR, "device node '%s': permissions '%s' must be made of r, w and m", in->path, perms);
    if (kind == 'p')
        return xf_say(XF_ERR, "device node '%s': type p (a fifo) is not made by the hook: use CDI mode (a "
                      "CDI-enabled runtime) for it", in->path);
    if (kind != 0 && kind != 'c' && kind != 'u' && kind != 'b')
        return xf_say(XF_ERR, "device node '%s': type must be c, b, u or p", in->path);

    out->path = in->path;
    out->host = in->host_path && in->host_path[0] ? in->host_path : in->path;
    /* stat(2) of the host node, following links, in the runtime's
     * namespace: the numbers when the spec has none, and the owner, group
     * and mode the spec does not give (docs/hook.md, "Device nodes": as the
     * vendor runtimes keep a node's HwHiAiUser 0660) */
    if (stat(out->host, &host) == 0 && (S_ISCHR(host.st_mode) || S_ISBLK(host.st_mode)))
        have_host = 1;
    if (!numbers) {
        struct stat st;
        char host_kind;
        if (stat(out->host, &st) != 0)
            return xf_say(XF_ERR, "device node '%s': host node '%s': %s (is the driver loaded? else regenerate the "
                          "spec)", in->path, out->host, strerror(errno));
        if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
            return xf_say(XF_ERR, "device node '%s': host node '%s' is not a device node", in->path, out->host);
        host_kind = S_ISCHR(st.st_mode) ? 'c' : 'b';
        if (kind == 0)
            kind = host_kind;
        else if ((kind == 'b') != (host_kind == 'b'))
            return xf_say(XF_ERR, "device node '%s': type %c but host node '%s' is %c", in->path, kind,
                          out->host, host_kind);
        major = major(st.st_rdev);
        minor = minor(st.st_rdev);
        mode = (in->present & XF_HAS_MODE) ? in->mode : (long long)(st.st_mode & 0777);
    } else {
        mode = (in->present & XF_HAS_MODE) ? in->mode : have_host ? (long long)(host.st_mode & 0777) : 0666;
    }
    if (kind == 0)
        kind = 'c';
    if (major < 0 || major > MAX_DEV_MAJOR || minor < 0 || minor > MAX_DEV_MINOR)
        return xf_say(XF_ERR, "device node '%s': numbers %lld:%lld out of range", in->path, major, minor);
    if (((in->present & XF_HAS_UID) && (in->uid < 0 || in->uid >= 0xffffffffLL)) ||
        ((in->present & XF_HAS_GID) && (in->gid < 0 || in->gid >= 0xffffffffLL)))
        return xf_say(XF_ERR, "device node '%s': uid/gid out of range", in->path);
    out->kind = kind;
    out->major = (unsigned)major;
    out->minor = (unsigned)minor;
    out->mode = (mode_t)((mode ? mode : 0666) & 07777); /* a fileMode of 0 is no mode: 0666 */
    out->uid = (in->present & XF_HAS_UID) ? in->uid : have_host ? (long long)host.st_uid : 0;
    out->gid = (in->present & XF_HAS_GID) ? in->gid : have_host ? (long long)host.st_gid : 0;
    out->chown = out->uid != 0 || out->gid != 0;

    /* the cgroup rule: 'u' (unbuffered) is a character device, access in "rwm" order */
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

/* A spec mount as the hook can make it: a bind mount whose flags the
 * known options set (propagation and atime options are left to the
 * runtime's defaults); any other option or mount type is refused. */
static int plan_mount(const struct xf_mount *m, struct xf_plan_mount *out)
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

    if (host == NULL || host[0] != '/' || strlen(host) >= PATH_MAX || !xf_good_cpath(target))
        return xf_say(XF_ERR, "mount '%s' -> '%s': hostPath and containerPath must be absolute paths",
                      host ? host : "(none)", target ? target : "(none)");
    if (!str_member_ok(m->json, "type", m->type) ||
        !strs_member_ok(m->json, "options", m->options, m->noptions))
        return xf_say(XF_ERR, "mount '%s' -> '%s': type must be a string and options a list of strings", host, target);
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
            return xf_say(XF_ERR, "mount '%s' -> '%s': option '%s' is not supported by the hook", host, target, opt);
    }
    if (!bind)
        return xf_say(XF_ERR, "mount '%s' -> '%s': only bind mounts can be made by the hook; use CDI mode for other "
                      "mount types", host, target);
    out->recursive = rbind;
    return XF_OK;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void add_link(struct xf_plan *p, const struct xf_link *link)
{
    if (p->nlinks == p->caplinks) {
        p->caplinks = p->caplinks ? 2 * p->caplinks : 8;
        p->links = xf_realloc(p->links, p->caplinks * sizeof(*p->links));
    }
    p->links[p->nlinks++] = *link;
}

/* A spec hook: xpu-cdi-hook's update-ldcache and create-symlinks become
 * folders and links of the plan (run in-process); any other hook is a note. */
static int plan_hook(const struct xf_hook *h, struct xf_plan *p, size_t max_folders)
{
    const char *sub = h->nargs > 1 ? h->args[1] : "", *opt;
    int ours, ldcache, rv;
    size_t nvalues = 0;

    if (h->path == NULL)
        return xf_say(XF_ERR, "a spec hook without a path");
    if (!str_member_ok(h->json, "path", h->path) || !strs_member_ok(h->json, "args", h->args, h->nargs))
        return xf_say(XF_ERR, "spec hook '%s': path must be a string and args a list of strings", h->path);
    ours = strncmp(base_name(h->path), "xpu-cdi", 7) == 0 ||
           (h->nargs > 0 && strncmp(base_name(h->args[0]), "xpu-cdi", 7) == 0);
    ldcache = strcmp(sub, "update-ldcache") == 0;
    if (!ours || (!ldcache && strcmp(sub, "create-symlinks") != 0)) {
        p->notes[p->nnotes++] = xf_printf("spec hook %s %s not run: %s", xf_quoted_short(h->path, strlen(h->path)), sub,
                                          TOOLS_NOTE);
        return XF_OK;
    }
    /* "--opt VALUE" / "--opt=VALUE"; anything else is an error */
    opt = ldcache ? "--folder" : "--link";
    for (size_t i = 2; i < h->nargs; i++) {
        const char *arg = h->args[i], *eq = strchr(arg, '='), *value;
        size_t namelen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (namelen != strlen(opt) || strncmp(arg, opt, namelen) != 0)
            return xf_say(XF_ERR, "%s: unexpected argument '%s' (usage: %s %s %s VALUE...)", sub, arg,
                          PROG_HOOK, sub, opt);
        if (eq)
            value = eq + 1;
        else if (i + 1 < h->nargs)
            value = h->args[++i];
        else
            return xf_say(XF_ERR, "%s: option %s needs a value", sub, opt);
        nvalues++;
        if (ldcache) {
            int seen = 0;
            if (value[0] != '/') /* a folder in the container, so absolute */
                return xf_say(XF_ERR, "update-ldcache: --folder '%s' must be an absolute container path", value);
            for (size_t f = 0; f < p->nfolders && !seen; f++)
                seen = strcmp(p->folders[f], value) == 0;
            if (!seen) {
                if (p->nfolders >= max_folders)
                    return xf_say(XF_ERR, "update-ldcache: more than %zu --folder values", max_folders);
                p->folders[p->nfolders++] = value;
            }
        } else {
            struct xf_link link;
            if ((rv = xf_link_parse(value, &link)) != XF_OK)
                return rv;
            add_link(p, &link);
        }
    }
    if (nvalues == 0)
        return xf_say(XF_ERR, "%s: needs at least one %s (usage: %s %s %s VALUE...)", sub, opt, PROG_HOOK, sub,
                      opt);
    return XF_OK;
}

int xf_plan_make(const struct xf_edits *e, struct xf_plan *p)
{
    int rv;
    size_t max_folders = XF_LDCACHE_MAX_FOLDERS;

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
