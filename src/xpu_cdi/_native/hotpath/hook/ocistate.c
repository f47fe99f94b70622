/* The OCI state and config.json: see ocistate.h. */
#include "hook/ocistate.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>

static const char *type_name(const fj *v)
{
    static const char *const names[] = {"null", "false", "true", "a number", "a string", "a list", "an object"};
    return names[v->type];
}

/* An absolute path cleaned lexically: repeated slashes one, "." dropped,
 * ".." removing the component before it (none above the root). */
static char *xf_normpath(const char *path)
{
    size_t n = strlen(path), top = 0;
    const char **parts = xf_alloc((n / 2 + 2) * sizeof(*parts));
    size_t *lens = xf_alloc((n / 2 + 2) * sizeof(*lens));
    struct xf_buf b = {0};
    const char *p = path;

    for (size_t len; (p = xf_component(p, &len)), len > 0; p += len) {
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (top > 0)
                top--;
        } else if (!(len == 1 && p[0] == '.')) {
            parts[top] = p;
            lens[top++] = len;
        }
    }
    xf_buf_add(&b, "/", 1);
    for (size_t i = 0; i < top; i++) {
        if (i)
            xf_buf_add(&b, "/", 1);
        xf_buf_add(&b, parts[i], lens[i]);
    }
    return b.data;
}

static int parse_state(const char *text, size_t len, struct xf_oci *o, const fj **state_out)
{
    char err[256];
    const fj *state, *v;
    size_t i = 0;

    while (i < len && strchr(" \t\r\n", text[i]))
        i++;
    if (i == len)
        return xf_say(XF_ERR, "no OCI state on stdin: the hook must be run by a container runtime "
                      "(as an OCI hook), not by hand");
    state = fj_parse(text, len, err, sizeof(err));
    if (state == NULL)
        return xf_say(XF_ERR, "OCI state on stdin is not valid JSON (%s): is the runtime OCI compliant?", err);
    if (state->type != FJ_OBJECT)
        return xf_say(XF_ERR, "OCI state on stdin must be a JSON object, got %s", type_name(state));
    v = fj_get(state, "id");
    if (fj_str(v) == NULL || v->len == 0)
        return xf_say(XF_ERR, "OCI state: 'id' must be a non-empty string, got %s",
                      v ? (v->type == FJ_STRING ? "an empty string" : type_name(v)) : "nothing");
    o->id = fj_str(v);
    v = fj_get(state, "bundle");
    if (fj_str(v) == NULL || fj_str(v)[0] != '/')
        return xf_say(XF_ERR, "OCI state of '%s': 'bundle' must be an absolute path, got %s", o->id,
                      fj_str(v) ? xf_printf("'%s'", fj_str(v)) : v ? type_name(v) : "nothing");
    o->bundle = fj_str(v);
    v = fj_get(state, "pid");
    if (v == NULL)
        o->pid = 0;
    else if (v->type == FJ_NUMBER && v->is_int && v->num >= 0 && v->num <= 0x7fffffff)
        o->pid = (int)v->num;
    else
        return xf_say(XF_ERR, "OCI state of '%s': 'pid' must be a non-negative integer, got %s", o->id,
                      v->type == FJ_NUMBER ? v->str : type_name(v));
    v = fj_get(state, "annotations");
    if (v != NULL && v->type != FJ_NULL && v->type != FJ_OBJECT)
        return xf_say(XF_ERR, "OCI state of '%s': 'annotations' must be an object, got %s", o->id, type_name(v));
    o->ann_state = (v && v->type == FJ_OBJECT) ? v : NULL;
    *state_out = state;
    return XF_OK;
}

static int read_config(struct xf_oci *o, const fj *state)
{
    char err[256], *text, *path = xf_strcat3(o->bundle, "/", "config.json"); /* no printf on the common path */
    size_t len;
    const fj *config, *root, *v, *process, *rpath = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rv;

    if (fd < 0)
        return xf_say(XF_ERR, "bundle '%s': cannot open config.json: %s", o->bundle, strerror(errno));
    rv = xf_read_fd(fd, XF_MAX_CONFIG_BYTES, &text, &len);
    close(fd);
    if (rv != XF_OK && len > XF_MAX_CONFIG_BYTES)
        return xf_say(XF_ERR, "'%s' is larger than %u bytes: refusing to parse it", path, XF_MAX_CONFIG_BYTES);
    if (rv != XF_OK)
        return xf_wrap(XF_ERR, "cannot read '%s'", path);
    config = fj_parse(text, len, err, sizeof(err));
    if (config == NULL)
        return xf_say(XF_ERR, "'%s' is not valid JSON: %s", path, err);
    if (config->type != FJ_OBJECT)
        return xf_say(XF_ERR, "'%s' must hold a JSON object, got %s", path, type_name(config));
    o->config = config;
    o->config_text = text;
    o->config_len = len;
    root = fj_get(config, "root");
    if (root != NULL && root->type == FJ_OBJECT)
        rpath = fj_get(root, "path");
    if (rpath == NULL || rpath->type == FJ_NULL)
        rpath = fj_get(state, "root"); /* crun's state */
    if (fj_str(rpath) == NULL || rpath->len == 0)
        return xf_say(XF_ERR, "'%s' has no root.path: cannot find the container's rootfs", path);
    o->rootfs = xf_normpath(fj_str(rpath)[0] == '/' ? fj_str(rpath) : xf_strcat3(o->bundle, "/", fj_str(rpath)));
    process = fj_get(config, "process");
    if (process != NULL && process->type == FJ_OBJECT) {
        v = fj_get(process, "env");
        if (v != NULL && v->type != FJ_NULL && v->type != FJ_ARRAY)
            return xf_say(XF_ERR, "config.json of '%s': process.env must be a list, got %s", o->id, type_name(v));
        o->env = (v && v->type == FJ_ARRAY) ? v : NULL;
    }
    v = fj_get(config, "annotations");
    if (v != NULL && v->type != FJ_NULL && v->type != FJ_OBJECT)
        return xf_say(XF_ERR, "config.json of '%s': annotations must be an object, got %s", o->id, type_name(v));
    o->ann_config = (v && v->type == FJ_OBJECT) ? v : NULL;
    return XF_OK;
}

int xf_oci_read_state(int fd, char **text, size_t *len)
{
    int rv = xf_read_fd_stat(fd, NULL, XF_MAX_STATE_BYTES, text, len); /* a pipe: no size to ask */

    if (rv != XF_OK && *len > XF_MAX_STATE_BYTES)
        return xf_say(XF_ERR, "the OCI state on stdin is larger than %u bytes: refusing to parse it",
                      XF_MAX_STATE_BYTES);
    if (rv != XF_OK)
        return xf_wrap(XF_ERR, "cannot read the OCI state on stdin");
    return XF_OK;
}

int xf_oci_load(const char *text, size_t len, struct xf_oci *o)
{
    const fj *state;
    int rv;

    memset(o, 0, sizeof(*o));
    if ((rv = parse_state(text, len, o, &state)) != XF_OK)
        return rv;
    return read_config(o, state);
}
