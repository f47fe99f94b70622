/* deviceNodes -> linux.devices and their allow rules. */
#include "runtime/edit/edit.h"
#include "runtime/edit/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The host node is stat'ed once per entry, though two questions ask for it. */
struct seen {
    const char *path;
    int rv, err;
    struct stat st;
};

static int stat_once(struct seen *s, const char *path, struct stat *st)
{
    if (s->path == NULL || strcmp(s->path, path) != 0) {
        s->path = path;
        s->rv = stat(path, &s->st);
        s->err = errno;
    }
    *st = s->st;
    errno = s->err;
    return s->rv;
}

/* oci_device + cgroup_rule: the linux.devices entry of a CDI deviceNodes
 * entry and its allow rule (*rule NULL for a fifo). */
static int oci_device(const fj *node, fj **dev, fj **rule)
{
    const fj *path = node ? fj_get(node, "path") : NULL;
    fj *typ, *major, *minor, *mode, *uid, *gid, *perm, *d, *r;
    struct seen seen = {0};
    struct stat st;
    int is_p;

    if (node == NULL || node->type != FJ_OBJECT)
        return xf_say(XF_ERR, "a deviceNodes entry is not an object");
    if (path == NULL || path->type != FJ_STRING || path->len == 0 || path->str[0] != '/')
        return xf_say(XF_ERR, "device node: 'path' is not an absolute path");
    typ = getv(node, "type");
    major = getv(node, "major");
    minor = getv(node, "minor");
    mode = getv(node, "fileMode");
    uid = fj_get(node, "uid"); /* not getv: a null uid or gid is refused below, not taken as absent */
    gid = fj_get(node, "gid");
    perm = getv(node, "permissions");
    if ((typ != NULL && typ->type != FJ_STRING) || !int_or_absent(major) || !int_or_absent(minor) ||
        !int_or_absent(mode) || !int_or_absent(uid) || !int_or_absent(gid) ||
        (perm != NULL && perm->type != FJ_STRING))
        return xf_say(XF_ERR, "device node %s: a field of an unusual type", path->str);
    is_p = fj_str_eq(typ, "p", 1);
    if (uid == NULL || gid == NULL) {
        /* the owner and group the spec does not give are the host node's
         * (docs/hook.md, "Device nodes"); 0 when there is no host node to ask */
        const fj *host = getv(node, "hostPath");
        const char *hp = fj_str(host != NULL && host->type == FJ_STRING && host->len > 0 ? host : path);
        int have = hp != NULL && stat_once(&seen, hp, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode));
        if (uid == NULL)
            uid = fj_new_int(have ? (long long)st.st_uid : 0);
        if (gid == NULL)
            gid = fj_new_int(have ? (long long)st.st_gid : 0);
    }
    if (typ == NULL || mode == NULL || (!is_p && (major == NULL || minor == NULL))) {
        /* read what is missing from the host node (hostPath or else path) */
        const fj *host = getv(node, "hostPath");
        const char *hp;
        const char *kind;
        if (host != NULL && host->type != FJ_STRING)
            return xf_say(XF_ERR, "device node %s: hostPath is not a string", path->str);
        hp = fj_str(host != NULL && host->len > 0 ? host : path);
        if (hp == NULL)
            return xf_say(XF_ERR, "device node %s: NUL in a path", path->str);
        if (stat_once(&seen, hp, &st) != 0)
            return xf_say(XF_ERR, "device node %s: cannot stat %s: %s", path->str, hp, strerror(errno));
        kind = S_ISCHR(st.st_mode) ? "c" : S_ISBLK(st.st_mode) ? "b" : S_ISFIFO(st.st_mode) ? "p" : NULL;
        if (kind == NULL)
            return xf_say(XF_ERR, "device node %s: %s is not a device node", path->str, hp);
        if (typ == NULL || typ->len == 0) /* typ or kind */
            typ = fj_new_str(kind);
        if (major == NULL || minor == NULL) {
            major = fj_new_int((long long)major(st.st_rdev));
            minor = fj_new_int((long long)minor(st.st_rdev));
        }
        if (mode == NULL)
            mode = fj_new_int((long long)(st.st_mode & 0777));
        is_p = fj_str_eq(typ, "p", 1);
    }
    d = fj_new(FJ_OBJECT);
    fj_set(d, "path", (fj *)path);
    fj_set(d, "type", typ);
    if (!is_p) {
        fj_set(d, "major", major);
        fj_set(d, "minor", minor);
    }
    fj_set(d, "fileMode", mode);
    fj_set(d, "uid", uid ? uid : fj_new_int(0));
    fj_set(d, "gid", gid ? gid : fj_new_int(0));
    *dev = d;
    *rule = NULL;
    if (is_p)
        return XF_OK;
    r = fj_new(FJ_OBJECT);
    fj_set(r, "allow", fj_new(FJ_TRUE));
    fj_set(r, "type", fj_new_str(fj_str_eq(typ, "b", 1) ? "b" : "c"));
    fj_set(r, "major", major);
    fj_set(r, "minor", minor);
    fj_set(r, "access", perm != NULL && perm->len > 0 ? perm : fj_new_str("rwm"));
    *rule = r;
    return XF_OK;
}

/* The nodes go in as a loop of "drop every entry with this path, append
 * the new one; append the allow rule unless config.json has it" would
 * leave them, in one pass over each list (hashed: a scan per node was
 * quadratic in the cards): the entries of config.json whose path no new
 * node has, in order, then the new nodes, each path at the place of its
 * last occurrence; the rules not yet there, in order, each once. */
int apply_nodes(fj *config, const struct xf_edits *e)
{
    fj *lx = fj_object_at(config, "linux"); /* not "linux": a predefined macro in gnu11 */
    fj *devices = fj_array_at(lx, "devices");
    fj *rules = fj_array_at(fj_object_at(lx, "resources"), "devices");
    fj **dev = xf_alloc((e->nnodes + 1) * sizeof(*dev)), **rule = xf_alloc((e->nnodes + 1) * sizeof(*rule));
    struct fj_valset new_paths = {0}, later = {0}, have_rules = {0};
    size_t i, m = 0;
    int rv = XF_OK;

    for (i = 0; i < e->nnodes && rv == XF_OK; i++)
        if ((rv = oci_device(e->nodes[i].json, &dev[i], &rule[i])) == XF_OK)
            fj_valset_add(&new_paths, fj_get(dev[i], "path"));
    if (rv == XF_OK) {
        for (i = 0; i < devices->n; i++) {
            const fj *item = devices->items[i];
            if (!(item->type == FJ_OBJECT && fj_valset_has(&new_paths, fj_get(item, "path"))))
                devices->items[m++] = devices->items[i];
        }
        devices->n = m;
        for (i = e->nnodes; i-- > 0;) /* from the end: the last of each path is the one kept */
            if (!fj_valset_add(&later, fj_get(dev[i], "path")))
                dev[i] = NULL;
        for (i = 0; i < rules->n; i++)
            fj_valset_add(&have_rules, rules->items[i]);
        for (i = 0; i < e->nnodes; i++) {
            if (dev[i] != NULL)
                fj_append(devices, dev[i]);
            if (rule[i] != NULL && fj_valset_add(&have_rules, rule[i]))
                fj_append(rules, rule[i]);
        }
    }
    fj_valset_free(&new_paths);
    fj_valset_free(&later);
    fj_valset_free(&have_rules);
    free(dev);
    free(rule);
    return rv;
}
