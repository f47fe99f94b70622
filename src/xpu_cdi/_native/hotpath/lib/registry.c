/* xf_resolve (request.h): the requested names looked up in the spec dirs
 * (spec_dirs.c) and the edits of their devices merged: each spec's shared
 * edits once, then each device's; nodes de-duplicated by path, mounts by
 * containerPath, hooks by content.  A name no spec defines is refused
 * with the dirs, the known devices and the skipped files. */
#include "lib/request.h"
#include "lib/registry.h"

#include <stdlib.h>
#include <string.h>

#include "lib/collections.h"
#include "lib/strings.h"

/* ---- merging ------------------------------------------------------------ */

/* An optional string field of a node or mount (hostPath, type,
 * permissions): NULL when absent; XF_ERR when given but not a non-empty
 * string -- a null or "" there is a broken spec, refused rather than
 * guessed to mean the default. */
static int opt_str(const fj *obj, const char *key, const char **out)
{
    const fj *v = fj_get(obj, key);

    *out = NULL;
    if (v == NULL)
        return XF_OK;
    if (fj_str(v) == NULL || v->len == 0)
        return xf_say(XF_ERR, "%s: not a usable string", key);
    *out = v->str;
    return XF_OK;
}

static int opt_int(const fj *obj, const char *key, long long *out, unsigned bit, unsigned *present)
{
    const fj *v = fj_get(obj, key);

    if (v == NULL)
        return XF_OK;
    if (v->type != FJ_NUMBER || !v->is_int)
        return xf_say(XF_ERR, "%s: not an integer", key);
    *out = v->num;
    *present |= bit;
    return XF_OK;
}

static int opt_strings(const fj *obj, const char *key, const char ***out, size_t *n)
{
    const fj *v = fj_get(obj, key);

    *out = NULL;
    *n = 0;
    if (v == NULL)
        return XF_OK;
    if (v->type != FJ_ARRAY)
        return xf_say(XF_ERR, "%s: not a list", key);
    *out = xf_alloc((v->n ? v->n : 1) * sizeof(**out));
    for (size_t i = 0; i < v->n; i++) {
        if (fj_str(v->items[i]) == NULL)
            return xf_say(XF_ERR, "%s: not a list of strings", key);
        (*out)[i] = v->items[i]->str;
    }
    *n = v->n;
    return XF_OK;
}

static int fill_node(const fj *j, void *to)
{
    struct xf_node *n = to;
    const char *type;

    n->json = j;
    n->path = fj_str(fj_get(j, "path"));
    if (n->path == NULL)
        return xf_say(XF_ERR, "deviceNodes: NUL in a path");
    if (opt_str(j, "hostPath", &n->host_path) != XF_OK || opt_str(j, "type", &type) != XF_OK ||
        opt_str(j, "permissions", &n->permissions) != XF_OK ||
        opt_int(j, "major", &n->major, XF_HAS_MAJOR, &n->present) != XF_OK ||
        opt_int(j, "minor", &n->minor, XF_HAS_MINOR, &n->present) != XF_OK ||
        opt_int(j, "fileMode", &n->mode, XF_HAS_MODE, &n->present) != XF_OK ||
        opt_int(j, "uid", &n->uid, XF_HAS_UID, &n->present) != XF_OK ||
        opt_int(j, "gid", &n->gid, XF_HAS_GID, &n->present) != XF_OK)
        return xf_wrap(XF_ERR, "device node %.200s", n->path);
    if (type != NULL) {
        if (strlen(type) != 1 || strchr("cbup", type[0]) == NULL)
            return xf_say(XF_ERR, "device node %.200s: type %.20s", n->path, type);
        n->type = type[0];
    }
    return XF_OK;
}

/* The two string fields every mount (hook) entry has (check_spec made sure
 * they are strings): NULL when one holds a NUL. */
static int required_pair(const fj *j, const char *a, const char *b, const char **va, const char **vb)
{
    *va = fj_str(fj_get(j, a));
    *vb = fj_str(fj_get(j, b));
    return *va != NULL && *vb != NULL;
}

static int fill_mount(const fj *j, void *to)
{
    struct xf_mount *m = to;

    m->json = j;
    if (!required_pair(j, "hostPath", "containerPath", &m->host_path, &m->container_path))
        return xf_say(XF_ERR, "mounts: NUL in a path");
    if (opt_str(j, "type", &m->type) != XF_OK || opt_strings(j, "options", &m->options, &m->noptions) != XF_OK)
        return xf_wrap(XF_ERR, "mount %.200s", m->container_path);
    return XF_OK;
}

static int fill_hook(const fj *j, void *to)
{
    struct xf_hook *h = to;

    h->json = j;
    if (!required_pair(j, "hookName", "path", &h->hook_name, &h->path))
        return xf_say(XF_ERR, "hooks: NUL in hookName or path");
    return opt_strings(j, "args", &h->args, &h->nargs) == XF_OK ? XF_OK : xf_wrap(XF_ERR, "hook %.200s", h->path);
}

/* Each entry of v read by fill into a zeroed array of elements of size
 * bytes (fill sets what the entry has); NULL (fill said why) when one
 * cannot be read. */
static void *fill_all(const struct xf_ptrvec *v, size_t size, int (*fill)(const fj *, void *))
{
    char *a = xf_alloc((v->n ? v->n : 1) * size);

    for (size_t i = 0; i < v->n; i++)
        if (fill(v->v[i], a + i * size) != XF_OK)
            return NULL;
    return a;
}

struct merge {
    struct xf_ptrvec env, nodes, mounts, hooks;  /* const fj * entries */
    struct xf_strmap node_paths, mount_targets;
    struct fj_valset hook_set; /* the hooks taken, by json.h's equality */
};

static const fj *list_of(const fj *edits, const char *key)
{
    const fj *v = fj_get(edits, key);

    return v != NULL && v->type == FJ_ARRAY ? v : NULL; /* check_edits: else absent or null */
}

/* The entries of edits' list whose field (a string) no earlier entry had, into out. */
static int add_new(const fj *edits, const char *list, const char *field, struct xf_strmap *seen,
                   struct xf_ptrvec *out)
{
    const fj *l = list_of(edits, list);

    for (size_t i = 0; l != NULL && i < l->n; i++) {
        const char *key = fj_str(fj_get(l->items[i], field));
        if (key == NULL)
            return xf_say(XF_ERR, "%s: NUL in a %s", list, field);
        if (xf_strmap_get(seen, key) == NULL) {
            xf_strmap_put(seen, key, (void *)key);
            xf_ptrvec_add(out, l->items[i]);
        }
    }
    return XF_OK;
}

/* One edits object into the merge: env appended, nodes by path and mounts by
 * containerPath only when new, hooks only when not equal to one taken. */
static int add_edits(struct merge *m, const fj *edits)
{
    const fj *l;

    if ((l = list_of(edits, "env")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            if (fj_str(l->items[i]) == NULL)
                return xf_say(XF_ERR, "env: an entry with NUL");
            xf_ptrvec_add(&m->env, l->items[i]);
        }
    if (add_new(edits, "deviceNodes", "path", &m->node_paths, &m->nodes) != XF_OK ||
        add_new(edits, "mounts", "containerPath", &m->mount_targets, &m->mounts) != XF_OK)
        return XF_ERR;
    if ((l = list_of(edits, "hooks")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            /* a hook two devices share runs once: equal as JSON values (json.h's rule) */
            if (fj_valset_add(&m->hook_set, l->items[i]))
                xf_ptrvec_add(&m->hooks, l->items[i]);
        }
    return XF_OK;
}

/* The edits beyond nodes, mounts, env and hooks: additionalGids, and the first edit the wrapper cannot apply. */
static int extra_edits(const struct device *const *devs, size_t n, struct xf_edits *out)
{
    static const char *const unsupported[] = {"intelRdt", "netDevices"};
    size_t cap = 0;

    for (size_t d = 0; d < n; d++) {
        const fj *sources[2] = {devs[d]->spec->edits, devs[d]->edits};
        for (size_t s = 0; s < 2; s++) {
            const fj *gids;
            if (sources[s] == NULL)
                continue;
            for (size_t k = 0; k < 2; k++)
                if (fj_truthy(fj_get(sources[s], unsupported[k]))) {
                    out->unsupported = unsupported[k];
                    return XF_OK; /* the wrapper refuses the container naming it: nothing else matters */
                }
            gids = fj_get(sources[s], "additionalGids");
            if (!fj_truthy(gids))
                continue;
            if (gids->type != FJ_ARRAY)
                return xf_say(XF_ERR, "additionalGids is not a list");
            for (size_t i = 0; i < gids->n; i++) {
                const fj *g = gids->items[i];
                size_t j;
                if (g->type != FJ_NUMBER || !g->is_int)
                    return xf_say(XF_ERR, "additionalGids: not an integer");
                for (j = 0; j < out->ngids && out->gids[j] != g->num; j++)
                    ;
                if (j < out->ngids)
                    continue;
                if (out->ngids == cap) {
                    cap = cap ? cap * 2 : 8;
                    out->gids = xf_realloc(out->gids, cap * sizeof(*out->gids));
                }
                out->gids[out->ngids++] = g->num;
            }
        }
    }
    return XF_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b); /* UTF-8: code point order */
}

/* The refusal of a name no spec defines: the dirs searched, the devices of
 * its kind that are known (or how to make some), and the files skipped,
 * which may be where it was meant to come from. */
static int unresolvable(const char *const *dirs, size_t ndirs, const struct xf_strmap *all, const char *q)
{
    const char *eq = strchr(q, '=');
    size_t klen = eq ? (size_t)(eq - q) : strlen(q);
    struct xf_ptrvec known = {0};
    struct xf_buf b = {0};

    for (size_t i = 0; i < all->cap; i++)
        if (all->keys[i] != NULL && strncmp(all->keys[i], q, klen) == 0 && all->keys[i][klen] == '=')
            xf_ptrvec_add(&known, all->keys[i] + klen + 1);
    if (known.n > 1)
        qsort(known.v, known.n, sizeof(*known.v), cmp_str);
    xf_buf_addf(&b, "unresolvable CDI device '%.200s' in ", q);
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&b, "%s%s", i ? ":" : "", dirs[i]);
    if (known.n > 0) {
        xf_buf_addf(&b, " (known %.*s devices: ", (int)klen, q);
        for (size_t i = 0; i < known.n; i++)
            xf_buf_addf(&b, "%s%s", i ? ", " : "", (const char *)known.v[i]);
        xf_buf_adds(&b, ")");
    } else {
        xf_buf_addf(&b, " (no spec defines kind '%.*s': run `xpu-cdi generate`)", (int)klen, q);
    }
    for (size_t i = 0; i < xf_nspec_problems; i++)
        xf_buf_addf(&b, "%s%s", i ? "; " : "; skipped: ", xf_spec_problems[i]);
    return xf_say(XF_ERR, "%s", b.data);
}

int xf_resolve(const char *const *dirs, size_t ndirs, const char *const *names, size_t n, struct xf_edits *out)
{
    struct xf_strmap all = {0}, seen_specs = {0};
    const struct device **devs = xf_alloc((n ? n : 1) * sizeof(*devs));
    struct merge m = {0};

    memset(out, 0, sizeof(*out));
    xf_spec_problems = NULL;
    xf_nspec_problems = 0;
    for (size_t i = 0; i < ndirs; i++) /* lowest priority first: later dirs replace devices */
        xf_load_spec_dir(dirs[i], &all);
    for (size_t i = 0; i < n; i++) {
        devs[i] = xf_strmap_get(&all, names[i]);
        if (devs[i] == NULL)
            return unresolvable(dirs, ndirs, &all, names[i]);
    }
    for (size_t i = 0; i < n; i++) {
        /* each spec's shared edits once, before the first of its devices' own; a spec is its file */
        if (xf_strmap_get(&seen_specs, devs[i]->spec->path) == NULL) {
            xf_strmap_put(&seen_specs, devs[i]->spec->path, (void *)devs[i]->spec);
            if (devs[i]->spec->edits != NULL && add_edits(&m, devs[i]->spec->edits) != XF_OK)
                return XF_ERR;
        }
        if (add_edits(&m, devs[i]->edits) != XF_OK)
            return XF_ERR;
    }
    out->env = xf_alloc((m.env.n ? m.env.n : 1) * sizeof(*out->env));
    for (size_t i = 0; i < m.env.n; i++)
        out->env[i] = ((const fj *)m.env.v[i])->str;
    out->nenv = m.env.n;
    if ((out->nodes = fill_all(&m.nodes, sizeof(*out->nodes), fill_node)) == NULL ||
        (out->mounts = fill_all(&m.mounts, sizeof(*out->mounts), fill_mount)) == NULL ||
        (out->hooks = fill_all(&m.hooks, sizeof(*out->hooks), fill_hook)) == NULL)
        return XF_ERR;
    out->nnodes = m.nodes.n;
    out->nmounts = m.mounts.n;
    out->nhooks = m.hooks.n;
    return extra_edits(devs, n, out);
}
