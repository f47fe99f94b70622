/* The node config file: see node_config.h.  Read through the YAML layer
 * (yaml.h, libyaml): an absent file or an empty document is the defaults. */
#include "lib/common.h"
#include "lib/node_config.h"
#include "lib/yaml.h"

#include <errno.h>
#include <stdio.h>

#define MAX_CONFIG_FILE_BYTES (64u << 10)

int xf_config_load(const char *path, struct xf_config *cfg, char *errbuf, size_t errlen)
{
    char err[768];
    fj *doc;
    const fj *v;
    int rv;

    cfg->path = path != NULL ? path : XF_CONFIG_DEFAULT_PATH;
    cfg->accept_env_when_unprivileged = 1;
    rv = xf_yaml_load_file(cfg->path, MAX_CONFIG_FILE_BYTES, &doc, err, sizeof(err));
    if (rv == -ENOENT)
        return XF_OK; /* no file: the defaults */
    if (rv == -ELIBACC) {
        snprintf(errbuf, errlen, "node config %s cannot be read: %s", cfg->path, err);
        return XF_FAIL;
    }
    if (rv != 0) {
        snprintf(errbuf, errlen, "node config %s: fix or remove the file (a YAML mapping such as "
                 "'%s: false')", err, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
        return XF_FAIL;
    }
    if (doc->type == FJ_NULL)
        return XF_OK; /* an empty document: the defaults */
    if (doc->type != FJ_OBJECT) {
        snprintf(errbuf, errlen, "node config '%s' must be a mapping of settings: write it as "
                 "'%s: false'", cfg->path, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
        return XF_FAIL;
    }
    v = fj_get(doc, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
    if (v != NULL && v->type != FJ_NULL) {
        if (v->type != FJ_TRUE && v->type != FJ_FALSE) {
            snprintf(errbuf, errlen, "node config '%s': %s must be true or false", cfg->path,
                     XF_CONFIG_KEY_ENV_UNPRIVILEGED);
            return XF_FAIL;
        }
        cfg->accept_env_when_unprivileged = v->type == FJ_TRUE;
    }
    return XF_OK;
}
