/* The node config file: see config.h.
 *
 * Parsed for now with the JSON layer (fjson.h): YAML's flow style that is
 * also JSON ({"accept-env-selection-when-unprivileged": false}).  The YAML
 * loader of the C layer (libyaml) replaces fj_parse below when it lands;
 * nothing else here changes. */
#include "common.h"
#include "config.h"
#include "fjson.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#define MAX_CONFIG_FILE_BYTES (64u << 10)

int xf_config_load(const char *path, struct xf_config *cfg, char *errbuf, size_t errlen)
{
    char err[256], *text;
    size_t len, i = 0;
    const fj *doc, *v;
    int rv, fd;

    cfg->path = path != NULL ? path : XF_CONFIG_DEFAULT_PATH;
    cfg->accept_env_when_unprivileged = 1;
    fd = open(cfg->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 && errno == ENOENT)
        return XF_OK; /* no file: the defaults */
    if (fd < 0) {
        snprintf(errbuf, errlen, "node config '%s' cannot be opened: %s: fix its permissions or remove it",
                 cfg->path, strerror(errno));
        return XF_FAIL;
    }
    rv = xf_read_fd(fd, MAX_CONFIG_FILE_BYTES, &text, &len);
    close(fd);
    if (rv != XF_OK) {
        snprintf(errbuf, errlen, "node config '%s' cannot be read (%s): a settings file is a few lines, "
                 "fix or remove it", cfg->path, xf_reason);
        return XF_FAIL;
    }
    while (i < len && strchr(" \t\r\n", text[i]))
        i++;
    if (i == len)
        return XF_OK; /* an empty YAML document: the defaults */
    doc = fj_parse(text, len, err, sizeof(err));
    if (doc == NULL) {
        snprintf(errbuf, errlen, "node config '%s' cannot be parsed (%s): this build reads YAML's "
                 "JSON-compatible flow form, e.g. {\"%s\": false}", cfg->path, err, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
        return XF_FAIL;
    }
    if (doc->type == FJ_NULL)
        return XF_OK;
    if (doc->type != FJ_OBJECT) {
        snprintf(errbuf, errlen, "node config '%s' must be a mapping of settings: write it as "
                 "{\"%s\": false}", cfg->path, XF_CONFIG_KEY_ENV_UNPRIVILEGED);
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
