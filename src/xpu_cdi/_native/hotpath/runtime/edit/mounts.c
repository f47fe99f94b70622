/* mounts -> config.json's mounts, parents before children. */
#include "runtime/edit/edit.h"
#include "runtime/edit/util.h"

#include <stdlib.h>
#include <string.h>

/* A destination cleaned as a path (Go's filepath.Clean, which runc and
 * the CDI library use on mount destinations): repeated slashes one, "."
 * dropped, ".." removing the component before it (at the root it stays
 * at the root; a relative path keeps its leading ".."s), "" as ".".  The
 * string may hold NUL. */
static struct span normpath(const char *p, size_t n)
{
    size_t slashes = 0, ncomp = 0, i = 0, len = 0;
    struct span *comps, out;
    char *buf;

    if (n == 0)
        return (struct span){".", 1};
    if (p[0] == '/')
        slashes = 1;
    comps = xf_alloc((n / 2 + 1) * sizeof(*comps));
    while (i <= n) {
        size_t s = i;
        while (i < n && p[i] != '/')
            i++;
        struct span c = {p + s, i - s};
        i++;
        if (c.n == 0 || (c.n == 1 && c.p[0] == '.'))
            continue;
        int dotdot = c.n == 2 && c.p[0] == '.' && c.p[1] == '.';
        int last_dotdot = ncomp > 0 && comps[ncomp - 1].n == 2 && comps[ncomp - 1].p[0] == '.' &&
                          comps[ncomp - 1].p[1] == '.';
        if (!dotdot || (!slashes && ncomp == 0) || last_dotdot)
            comps[ncomp++] = c;
        else if (ncomp > 0)
            ncomp--;
    }
    buf = xf_alloc(n + 3);
    for (i = 0; i < slashes; i++)
        buf[len++] = '/';
    for (i = 0; i < ncomp; i++) {
        if (i > 0)
            buf[len++] = '/';
        memcpy(buf + len, comps[i].p, comps[i].n);
        len += comps[i].n;
    }
    free(comps);
    if (len == 0)
        return (struct span){".", 1};
    out.p = buf;
    out.n = len;
    return out;
}

/* A mount's depth: the components of its cleaned destination (0 without one). */
static size_t mount_depth(const fj *m)
{
    const fj *dst = m->type == FJ_OBJECT ? fj_get(m, "destination") : NULL;
    struct span np;
    size_t depth = 0;

    if (dst == NULL || dst->type != FJ_STRING)
        return 0;
    np = normpath(dst->str, dst->len);
    for (size_t i = 0; i < np.n;) {
        size_t s = i;
        while (i < np.n && np.p[i] != '/')
            i++;
        depth += i > s;
        i++;
    }
    return depth;
}

static int same_destination(const fj *item, const void *arg)
{
    const struct span *want = arg;
    const fj *dst;
    struct span np;

    if (item->type != FJ_OBJECT)
        return 0;
    dst = fj_get(item, "destination");
    /* no destination is "" (a string otherwise: checked before), which no CDI mount has */
    np = dst != NULL ? normpath(dst->str, dst->len) : normpath("", 0);
    return np.n == want->n && memcmp(np.p, want->p, np.n) == 0;
}

/* oci_mount: the OCI mounts entry of a CDI mount. */
static int oci_mount(const fj *m, fj **out)
{
    const fj *src = m ? fj_get(m, "hostPath") : NULL, *dst = m ? fj_get(m, "containerPath") : NULL;
    const fj *opts = m ? getv(m, "options") : NULL, *typ = m ? getv(m, "type") : NULL;
    fj *options = fj_new(FJ_ARRAY), *o;

    if (m == NULL || m->type != FJ_OBJECT || src == NULL || src->type != FJ_STRING || dst == NULL ||
        dst->type != FJ_STRING || dst->len == 0 || dst->str[0] != '/')
        return xf_say(XF_ERR, "a mount without hostPath or an absolute containerPath");
    if ((opts != NULL && opts->type != FJ_ARRAY) || (typ != NULL && typ->type != FJ_STRING))
        return xf_say(XF_ERR, "mount %s: options or type of an unusual type", dst->str);
    for (size_t i = 0; opts != NULL && i < opts->n; i++)
        fj_append(options, opts->items[i]);
    if (typ == NULL || typ->len == 0) { /* none: "bind" when the options bind, else none (the runtime's default) */
        typ = NULL;
        for (size_t i = 0; i < options->n && typ == NULL; i++)
            if (fj_str_eq(options->items[i], "bind", 4) || fj_str_eq(options->items[i], "rbind", 5))
                typ = fj_new_str("bind");
    }
    o = fj_new(FJ_OBJECT);
    fj_set(o, "destination", (fj *)dst);
    fj_set(o, "source", (fj *)src);
    if (typ != NULL)
        fj_set(o, "type", (fj *)typ);
    fj_set(o, "options", options);
    *out = o;
    return XF_OK;
}

struct ranked {
    size_t depth, pos;
    fj *item;
};

static int ranked_cmp(const void *x, const void *y)
{
    const struct ranked *a = x, *b = y;

    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos; /* equal depths keep their order */
}

int apply_mounts(fj *config, const struct xf_edits *e)
{
    fj *current = fj_array_at(config, "mounts");
    struct ranked *r;

    for (size_t i = 0; i < current->n; i++) {
        const fj *c = current->items[i], *dst = fj_get(c, "destination");
        if (c->type == FJ_OBJECT && dst != NULL && dst->type != FJ_STRING)
            return xf_say(XF_ERR, "config.json: a mount destination is not a string");
    }
    for (size_t i = 0; i < e->nmounts; i++) {
        fj *new = NULL;
        const fj *dst;
        struct span want;
        int rv = oci_mount(e->mounts[i].json, &new);
        if (rv != XF_OK)
            return rv;
        dst = fj_get(new, "destination");
        want = normpath(dst->str, dst->len);
        keep_unless(current, same_destination, &want);
        fj_append(current, new);
    }
    /* parents before children (the runtime mounts in list order, and a mount
     * under another must come after it), equal depths in their order; the
     * whole list, config.json's own mounts too */
    if (current->n < 2)
        return XF_OK;
    r = xf_alloc(current->n * sizeof(*r));
    for (size_t i = 0; i < current->n; i++)
        r[i] = (struct ranked){mount_depth(current->items[i]), i, current->items[i]};
    qsort(r, current->n, sizeof(*r), ranked_cmp);
    for (size_t i = 0; i < current->n; i++)
        current->items[i] = r[i].item;
    free(r);
    return XF_OK;
}
