/* The node config file: see node_config.h.  An absent file or an empty
 * document is the defaults. */
#include "lib/common.h"
#include "lib/files.h"
#include "lib/node_config.h"
#include "lib/yaml.h"

#define MAX_CONFIG_FILE_BYTES (64u << 10)
#define FIX "fix or remove the file (a YAML mapping such as '" XF_CONFIG_KEY_ENV_UNPRIVILEGED ": false')"

int xf_config_load(const char *path, struct xf_config *cfg)
{
    char err[512], *data;
    size_t len;
    struct stat st;
    fj *doc;
    const fj *v;

    cfg->path = path != NULL ? path : XF_CONFIG_DEFAULT_PATH;
    cfg->accept_env_when_unprivileged = 1;
    switch (xf_read_regular(cfg->path, MAX_CONFIG_FILE_BYTES, &data, &len, &st)) {
    case RD_ABSENT:
        return XF_OK; /* the defaults */
    case RD_UNREADABLE:
    case RD_REFUSED:
        xf_wrap(XF_ERR, "node config %s", cfg->path);
        return xf_append(XF_ERR, ": " FIX);
    }
    if (!fy_load_library(err, sizeof(err)))
        return xf_say(XF_ERR, "node config %s cannot be read: %s", cfg->path, err);
    if ((doc = fy_parse(data, len, 0, err, sizeof(err))) == NULL)
        return xf_say(XF_ERR, "node config %s: not valid YAML: %s: " FIX, cfg->path, err);
    if (doc->type == FJ_NULL)
        return XF_OK; /* an empty document: the defaults */
    if (doc->type != FJ_OBJECT)
        return xf_say(XF_ERR, "node config '%s' must be a mapping of settings: write it as '%s: false'", cfg->path,
                      XF_CONFIG_KEY_ENV_UNPRIVILEGED);
    v = fj_get(doc, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
    if (v != NULL && v->type != FJ_NULL) {
        if (v->type != FJ_TRUE && v->type != FJ_FALSE)
            return xf_say(XF_ERR, "node config '%s': %s must be true or false", cfg->path,
                          XF_CONFIG_KEY_ENV_UNPRIVILEGED);
        cfg->accept_env_when_unprivileged = v->type == FJ_TRUE;
    }
    return XF_OK;
}
