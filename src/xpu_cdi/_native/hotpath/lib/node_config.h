/* The node config file (docs/operations.md): /etc/xpu-cdi/config.yaml
 * unless --config PATH says otherwise; an absent file means the defaults.
 * A YAML mapping; the keys read here:
 *
 *   accept-env-selection-when-unprivileged  bool, default true: when false,
 *       the selection variables (CXPU_VISIBLE_DEVICES, ...) of a container
 *       that is not privileged (privileged.h) are ignored; cdi.k8s.io/
 *       annotations still select.
 *
 * Other keys belong to other readers (the device plugin) and are left
 * alone.  A file that cannot be read or parsed, or a key of the wrong
 * type, is an error: the caller fails closed. */
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
