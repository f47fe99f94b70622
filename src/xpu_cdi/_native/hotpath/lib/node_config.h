/* The node config file, /etc/xpu-cdi/config.yaml or --config PATH
 * (docs/operations.md has its keys): only
 * accept-env-selection-when-unprivileged is read here; other keys are other
 * readers'.  An absent file is the defaults; one that cannot be read or
 * parsed, or a key of the wrong type, is an error and the caller fails
 * closed (the setting may forbid what is asked). */
#ifndef XF_NODE_CONFIG_H
#define XF_NODE_CONFIG_H
#include <stddef.h>

#define XF_CONFIG_DEFAULT_PATH "/etc/xpu-cdi/config.yaml"
#define XF_CONFIG_KEY_ENV_UNPRIVILEGED "accept-env-selection-when-unprivileged"

struct xf_config {
    const char *path;                   /* the file read (or that was absent) */
    int accept_env_when_unprivileged;   /* default 1 */
};

/* Load path (NULL: the default path) into *cfg.  XF_OK (defaults when the
 * file does not exist), or XF_ERR with xf_reason saying what is wrong and
 * how to fix it. */
int xf_config_load(const char *path, struct xf_config *cfg);

#endif
