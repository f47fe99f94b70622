/* See prepare.h. */
#include "runtime/prepare.h"
#include "runtime/atomic.h"
#include "runtime/edit/edit.h"
#include "lib/may_request.h"
#include "lib/privileged.h"
#include "lib/strings.h"

#include <stdlib.h>
#include <string.h>

#define XF_PARSE_MAX_CONFIG_BYTES ((size_t)4 << 20) /* as the hook reads config.json (ocistate.h) */

/* A known selection variable (knownSelection of the
 * indexes, which generate writes from the profiles; the last index wins on
 * a repeated variable, variables in sorted order), set to something other
 * than a "none" value, for a kind no index serves: refused, since the
 * container would start without the cards it asked for. */
struct known {
    const char *var, *kind;
};

static int cmp_known(const void *a, const void *b)
{
    return strcmp(((const struct known *)a)->var, ((const struct known *)b)->var);
}

static int unserved(const fj *env, const struct xf_indexes *ix, const char *where)
{
    struct known *known = NULL;
    size_t nknown = 0;

    for (size_t i = 0; env != NULL && i < ix->n; i++) {
        const fj *ks = fj_get(ix->items[i].json, "knownSelection");
        for (size_t j = 0; ks != NULL && ks->type == FJ_OBJECT && j < ks->n; j++) {
            const char *var = fj_str(ks->keys[j]), *kind = fj_str(ks->items[j]);
            size_t at = nknown;
            if (var == NULL || kind == NULL)
                continue;
            for (size_t k = 0; k < nknown; k++)
                if (strcmp(known[k].var, var) == 0)
                    at = k;
            if (at == nknown)
                known = xf_realloc(known, ++nknown * sizeof(*known));
            known[at].var = var;
            known[at].kind = kind;
        }
    }
    if (nknown > 1)
        qsort(known, nknown, sizeof(*known), cmp_known);
    for (size_t k = 0; k < nknown; k++) {
        const char *var = known[k].var;
        size_t vl = strlen(var), n;
        const fj *found = NULL;
        const char *s;
        int served = 0;
        for (size_t i = 0; i < env->n; i++) /* env_map: the last entry wins */
            if (fj_str_starts(env->items[i], var, vl) && env->items[i]->str[vl] == '=')
                found = env->items[i];
        if (found == NULL)
            continue;
        for (size_t i = 0; i < ix->n && !served; i++)
            served = strcmp(ix->items[i].kind, known[k].kind) == 0;
        if (served)
            continue;
        /* the value without ASCII whitespace around it, as selection
         * reads it; anything else left (Unicode spaces too) is a request */
        s = found->str + vl + 1;
        n = found->len - vl - 1;
        xf_strip_space(&s, &n);
        if (!(n == 0 || (n == 4 && (memcmp(s, "void", 4) == 0 || memcmp(s, "none", 4) == 0))))
            return xf_say(XF_ERR, "%s=%s asks for %s devices but no spec in %s defines that kind (with its "
                          ".xpu-cdi index): run `xpu-cdi generate` on this node", var, xf_quoted_short(s, n),
                          known[k].kind, where);
    }
    return XF_OK;
}

/* The dirs as XPU_CDI_SPEC_DIRS spells them, for messages. */
static const char *joined(const char *const *dirs, size_t ndirs)
{
    struct xf_buf b = {0};

    xf_buf_adds(&b, "");
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&b, "%s%s", i ? ":" : "", dirs[i]);
    return b.data;
}

int xf_prepare(const char *bundle, const char *const *dirs, size_t ndirs, const struct xf_config *cfg, int *edited,
               const char **ignored)
{
    size_t bl = strlen(bundle), len, nnames;
    const char *path = bl > 0 && bundle[bl - 1] == '/' ? xf_printf("%sconfig.json", bundle)
                                                       : xf_printf("%s/config.json", bundle);
    const fj *process, *env, *ann;
    const char **names;
    char *data, err[256];
    unsigned mode;
    fj *config;
    struct xf_indexes ix;
    struct xf_edits edits;
    struct xf_buf out = {0};
    int rv;

    *edited = 0;
    *ignored = NULL;
    if (xf_read_file(path, XF_MAX_CONFIG_BYTES, &data, &len, &mode) != XF_OK)
        return xf_append(XF_ERR, ": is --bundle right?");
    if (!xf_may_request(data, len, dirs, ndirs))
        return XF_OK; /* the common case: no JSON parsed, nothing written */
    if (len > XF_PARSE_MAX_CONFIG_BYTES) /* the tree costs up to ~50x the text */
        return xf_say(XF_ERR, "'%s' is larger than %zu bytes: refusing to parse it", path,
                      XF_PARSE_MAX_CONFIG_BYTES);
    config = fj_parse(data, len, err, sizeof(err));
    if (config == NULL)
        return xf_say(XF_ERR, "'%s' is not valid JSON: %s", path, err);
    if (config->type != FJ_OBJECT)
        return xf_say(XF_ERR, "'%s': expected a JSON object", path);
    process = fj_get(config, "process");
    env = process != NULL && process->type == FJ_OBJECT ? fj_get(process, "env") : NULL;
    if (env != NULL && env->type != FJ_ARRAY)
        env = NULL; /* no env to select by: the real runtime refuses such a config.json itself */
    ann = fj_get(config, "annotations");
    if (ann != NULL && ann->type != FJ_OBJECT)
        ann = NULL;
    if ((rv = xf_load_indexes(dirs, ndirs, &ix)) != XF_OK)
        return rv;
    if (!cfg->accept_env_when_unprivileged && !xf_privileged(config) && (*ignored = xf_selection_var(&ix, env)))
        env = NULL; /* the node's setting: only annotations select for an unprivileged container */
    if (xf_requested(&ix, env, NULL, ann, &names, &nnames) != XF_OK)
        return xf_append(XF_ERR, " (spec dirs searched: %s)", joined(dirs, ndirs));
    if (unserved(env, &ix, joined(dirs, ndirs)) != XF_OK)
        return XF_ERR;
    if (nnames == 0)
        return XF_OK;
    if ((rv = xf_resolve(dirs, ndirs, names, nnames, &edits)) != XF_OK)
        return rv;
    if (edits.unsupported != NULL)
        return xf_say(XF_ERR, "a requested CDI device needs '%s', which xpu-container-runtime does not apply: use a "
                      "CDI-enabled runtime for it", edits.unsupported);
    if ((rv = xf_apply(config, &edits)) != XF_OK)
        return rv;
    /* the parser refused duplicate keys and numbers beyond a double, so
     * the tree is written as it is */
    fj_write(config, &out);
    if ((rv = xf_write_atomic(path, out.data, out.len, mode)) != XF_OK)
        return rv;
    *edited = 1;
    return XF_OK;
}
