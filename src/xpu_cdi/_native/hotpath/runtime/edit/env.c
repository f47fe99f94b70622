/* env -> process.env, with LD_LIBRARY_PATH merged from the edits' own and
 * the update-ldcache --folder arguments. */
#include "runtime/edit/edit.h"
#include "runtime/edit/util.h"

#include <stdlib.h>
#include <string.h>

#define LD_VAR "LD_LIBRARY_PATH"

/* Replace the first entry KEY=..., else append. */
static void set_env(fj *env, const char *entry, size_t keylen)
{
    for (size_t i = 0; i < env->n; i++)
        if (fj_str_starts(env->items[i], entry, keylen + 1)) {
            env->items[i] = fj_new_str(entry);
            return;
        }
    fj_append(env, fj_new_str(entry));
}

struct strlist {
    const char **v;
    size_t n, cap;
};

static int strlist_has(const struct strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return 1;
    return 0;
}

static void strlist_add(struct strlist *l, const char *s)
{
    if (l->n == l->cap)
        l->v = xf_realloc(l->v, (l->cap = l->cap ? 2 * l->cap : 16) * sizeof(*l->v));
    l->v[l->n++] = s;
}

/* Non-empty ':'-separated parts of s, appended to l. */
static void split_dirs(struct strlist *l, const char *s)
{
    while (*s != '\0') {
        const char *end = strchrnul(s, ':');
        if (end > s)
            strlist_add(l, xf_strndup(s, (size_t)(end - s)));
        s = *end ? end + 1 : end;
    }
}

/* The library dirs: LD_LIBRARY_PATH entries of the edits' env and the
 * --folder arguments of update-ldcache hooks, first occurrence kept. */
static int library_dirs(const struct xf_edits *e, struct strlist *out)
{
    struct strlist all = {0};

    for (size_t i = 0; i < e->nenv; i++)
        if (strncmp(e->env[i], LD_VAR "=", sizeof(LD_VAR)) == 0)
            split_dirs(&all, e->env[i] + sizeof(LD_VAR));
    for (size_t h = 0; h < e->nhooks; h++) {
        const fj *hook = e->hooks[h].json, *args = hook && hook->type == FJ_OBJECT ? getv(hook, "args") : NULL;
        int ldcache = 0;
        if (args == NULL)
            continue;
        if (args->type != FJ_ARRAY)
            return xf_say(XF_ERR, "a hook's args is not a list");
        for (size_t i = 0; i < args->n && !ldcache; i++)
            ldcache = fj_str_eq(args->items[i], "update-ldcache", 14);
        if (!ldcache)
            continue;
        for (size_t i = 0; i < args->n; i++) {
            const fj *a = args->items[i], *d = NULL;
            if (fj_str_eq(a, "--folder", 8) && i + 1 < args->n)
                d = args->items[i + 1];
            else if (fj_str_starts(a, "--folder=", 9))
                d = a; /* the part after "=" below */
            else
                continue;
            if (fj_str(d) == NULL)
                return xf_say(XF_ERR, "update-ldcache --folder of an unusual value");
            strlist_add(&all, d == a ? d->str + 9 : d->str);
        }
    }
    for (size_t i = 0; i < all.n; i++)
        if (!strlist_has(out, all.v[i]))
            strlist_add(out, all.v[i]);
    free(all.v);
    return XF_OK;
}

int apply_env(fj *config, const struct xf_edits *e)
{
    fj *env = fj_array_at(fj_object_at(config, "process"), "env");
    struct strlist dirs = {0}, merged = {0};
    const fj *cur = NULL;
    struct xf_buf value = {0};
    int rv;

    for (size_t i = 0; i < e->nenv; i++) {
        const char *eq = strchr(e->env[i], '=');
        size_t keylen = eq ? (size_t)(eq - e->env[i]) : 0;
        if (keylen == 0)
            return xf_say(XF_ERR, "env entry %s: expected KEY=VALUE", e->env[i]);
        if (!(keylen == sizeof(LD_VAR) - 1 && memcmp(e->env[i], LD_VAR, keylen) == 0))
            set_env(env, e->env[i], keylen);
    }
    rv = library_dirs(e, &dirs);
    if (rv != XF_OK || dirs.n == 0)
        return rv;
    for (size_t i = 0; i < env->n; i++) /* the last one wins, as the kernel's getenv sees it */
        if (fj_str_starts(env->items[i], LD_VAR "=", sizeof(LD_VAR)))
            cur = env->items[i];
    if (cur != NULL && fj_str(cur) == NULL)
        return xf_say(XF_ERR, "config.json: NUL in LD_LIBRARY_PATH");
    if (cur != NULL)
        split_dirs(&merged, cur->str + sizeof(LD_VAR));
    {
        size_t have = merged.n;
        for (size_t i = 0; i < dirs.n; i++) {
            int seen = 0;
            for (size_t k = 0; k < have && !seen; k++)
                seen = strcmp(merged.v[k], dirs.v[i]) == 0;
            if (!seen)
                strlist_add(&merged, dirs.v[i]);
        }
    }
    xf_buf_adds(&value, LD_VAR "=");
    for (size_t i = 0; i < merged.n; i++)
        xf_buf_addf(&value, "%s%s", i ? ":" : "", merged.v[i]);
    set_env(env, value.data, sizeof(LD_VAR) - 1);
    free(dirs.v);
    free(merged.v);
    return XF_OK;
}
