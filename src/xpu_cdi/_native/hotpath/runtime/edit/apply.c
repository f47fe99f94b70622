/* xf_apply (edit.h): the edits in order; hooks and additionalGids here. */
#include "runtime/edit/edit.h"
#include "runtime/edit/util.h"

#include <string.h>

static const char *const hook_stages[] = {"prestart", "createRuntime", "createContainer",
                                          "startContainer", "poststart", "poststop"};

static int apply_hooks(fj *config, const struct xf_edits *e)
{
    static const char *const copied[] = {"args", "env", "timeout"};

    for (size_t h = 0; h < e->nhooks; h++) {
        const fj *hook = e->hooks[h].json;
        const fj *stage = hook && hook->type == FJ_OBJECT ? fj_get(hook, "hookName") : NULL;
        const fj *path = hook && hook->type == FJ_OBJECT ? fj_get(hook, "path") : NULL;
        const char *name = NULL;
        fj *oci, *list;
        for (size_t s = 0; s < sizeof(hook_stages) / sizeof(hook_stages[0]) && name == NULL; s++)
            if (fj_str_eq(stage, hook_stages[s], strlen(hook_stages[s])))
                name = hook_stages[s];
        if (name == NULL)
            return xf_say(XF_ERR, "a hook with an unknown hookName");
        if (path == NULL || path->type != FJ_STRING || path->len == 0 || path->str[0] != '/')
            return xf_say(XF_ERR, "a hook whose path is not absolute");
        if (getv(hook, "timeout") != NULL && !int_or_absent(getv(hook, "timeout")))
            return xf_say(XF_ERR, "hook %s: timeout is not an integer (seconds)", path->str);
        oci = fj_new(FJ_OBJECT);
        fj_set(oci, "path", (fj *)path);
        for (size_t k = 0; k < sizeof(copied) / sizeof(copied[0]); k++) {
            fj *v = getv(hook, copied[k]);
            if (v != NULL)
                fj_set(oci, copied[k], v);
        }
        list = fj_array_at(fj_object_at(config, "hooks"), name);
        if (!contains(list, oci))
            fj_append(list, oci);
    }
    return XF_OK;
}

static void apply_gids(fj *config, const struct xf_edits *e)
{
    fj *have;

    if (e->ngids == 0)
        return;
    have = fj_array_at(fj_object_at(fj_object_at(config, "process"), "user"), "additionalGids");
    for (size_t i = 0; i < e->ngids; i++) {
        fj *g = fj_new_int(e->gids[i]);
        if (!contains(have, g))
            fj_append(have, g);
    }
}

int xf_apply(fj *config, const struct xf_edits *e)
{
    int rv;

    if (config == NULL || config->type != FJ_OBJECT)
        return xf_say(XF_ERR, "config.json: expected a JSON object");
    if ((rv = apply_nodes(config, e)) != XF_OK || (rv = apply_mounts(config, e)) != XF_OK ||
        (rv = apply_env(config, e)) != XF_OK || (rv = apply_hooks(config, e)) != XF_OK)
        return rv;
    apply_gids(config, e);
    return XF_OK;
}
