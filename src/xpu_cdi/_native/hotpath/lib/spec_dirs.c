/* Reading the spec dirs for xf_resolve (request.h; docs/architecture.md):
 * the rules of the tooling's reader, cdi/registry.py, which tests check
 * against the same specs. */
#include "lib/request.h"
#include "lib/registry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/collections.h"
#include "lib/files.h"
#include "lib/strings.h"
#include "lib/yaml.h"

#define MAX_SPEC_BYTES ((size_t)16 << 20) /* cdi/registry.py's limits */
#define MAX_FILES 4096

int xf_spec_dirs(const char *const *given, size_t ngiven, const char *env, const char ***dirs, size_t *n)
{
    const char **out = xf_alloc((XF_MAX_SPEC_DIRS + 1) * sizeof(*out));
    const char *p = env != NULL ? env : "";
    size_t k = 0;

    if (ngiven > XF_MAX_SPEC_DIRS)
        return xf_say(XF_ERR, "more than %d --spec-dir options: keep the few that hold CDI specs", XF_MAX_SPEC_DIRS);
    for (; k < ngiven; k++)
        out[k] = given[k];
    while (ngiven == 0 && *p != '\0') {
        const char *end = strchrnul(p, ':');
        if (end > p && k == XF_MAX_SPEC_DIRS)
            return xf_say(XF_ERR, "more than %d spec dirs in XPU_CDI_SPEC_DIRS: keep the few that hold CDI specs",
                          XF_MAX_SPEC_DIRS);
        if (end > p)
            out[k++] = xf_strndup(p, (size_t)(end - p));
        p = *end ? end + 1 : end;
    }
    if (k == 0) {
        out[k++] = "/etc/cdi";
        out[k++] = "/var/run/cdi";
    }
    *dirs = out;
    *n = k;
    return XF_OK;
}

/* One line per spec file or dir that was skipped (see request.h). */
const char **xf_spec_problems;
size_t xf_nspec_problems;

static void problem(const char *line)
{
    xf_spec_problems = xf_realloc(xf_spec_problems, (xf_nspec_problems + 1) * sizeof(*xf_spec_problems));
    xf_spec_problems[xf_nspec_problems++] = xf_strdup(line);
}

/* Where a check failed: "spec 'P': device 'N'" (dev the device's name),
 * or "spec 'P': containerEdits" (dev NULL); made only for the message. */
static const char *edits_place(const char *path, const char *dev)
{
    if (dev != NULL)
        return xf_printf("spec '%s': device '%.64s'", path, dev);
    return xf_printf("spec '%s': containerEdits", path);
}

/* The checks of one edits object: a device's (dev its name) or the spec's own (dev NULL). */
static int check_edits(const fj *e, const char *path, const char *dev)
{
    static const char *const lists[] = {"deviceNodes", "mounts", "hooks"};
    static const char *const needs[] = {"'path'", "'hostPath' and 'containerPath'", "'hookName' and 'path'"};
    static const char *const required[][2] = {{"path", NULL}, {"hostPath", "containerPath"}, {"hookName", "path"}};
    const fj *env = fj_get(e, "env");

    if (env != NULL && env->type != FJ_NULL && !fj_strings_or_absent(env))
        return xf_say(XF_ERR, "%s: 'env' must be a list of strings", edits_place(path, dev));
    for (size_t k = 0; k < 3; k++) {
        const fj *items = fj_get(e, lists[k]);
        if (items == NULL || items->type == FJ_NULL)
            continue;
        if (items->type != FJ_ARRAY)
            return xf_say(XF_ERR, "%s: '%s' must be a list", edits_place(path, dev), lists[k]);
        for (size_t i = 0; i < items->n; i++) {
            const fj *item = items->items[i];
            int ok = item->type == FJ_OBJECT;
            for (size_t f = 0; ok && f < 2 && required[k][f] != NULL; f++) {
                const fj *v = fj_get(item, required[k][f]);
                ok = v != NULL && v->type == FJ_STRING;
            }
            if (!ok)
                return xf_say(XF_ERR, "%s: every entry of '%s' needs %s", edits_place(path, dev), lists[k],
                              needs[k]);
        }
    }
    return XF_OK;
}

/* The structural checks of a spec file; *kind and *devices on success. */
static int check_spec(const fj *spec, const char *path, const fj **kind, const fj **devices)
{
    static const char *const fields[] = {"cdiVersion", "kind", "devices"};
    const fj *edits;
    size_t slashes = 0;

    if (spec->type != FJ_OBJECT)
        return xf_say(XF_ERR, "spec '%s': expected an object at the top", path);
    for (size_t i = 0; i < 3; i++)
        if (fj_get(spec, fields[i]) == NULL)
            return xf_say(XF_ERR, "spec '%s': missing required field '%s'", path, fields[i]);
    *kind = fj_get(spec, "kind");
    if ((*kind)->type == FJ_STRING)
        for (size_t i = 0; i < (*kind)->len; i++)
            slashes += (*kind)->str[i] == '/';
    if ((*kind)->type != FJ_STRING || slashes != 1 || fj_str(*kind) == NULL)
        return xf_say(XF_ERR, "spec '%s': invalid kind %s (write it as vendor/class, e.g. kunlunxin.com/xpu)", path,
                      (*kind)->type == FJ_STRING ? xf_quoted((*kind)->str, (*kind)->len) : "(not a string)");
    *devices = fj_get(spec, "devices");
    if ((*devices)->type != FJ_ARRAY || (*devices)->n == 0)
        return xf_say(XF_ERR, "spec '%s': 'devices' must be a non-empty list", path);
    for (size_t i = 0; i < (*devices)->n; i++) {
        const fj *dev = (*devices)->items[i], *name = NULL, *ce = NULL;
        if (dev->type == FJ_OBJECT) {
            name = fj_get(dev, "name");
            ce = fj_get(dev, "containerEdits");
        }
        if (name == NULL || name->type != FJ_STRING || ce == NULL || ce->type != FJ_OBJECT)
            return xf_say(XF_ERR, "spec '%s': every device needs a 'name' and 'containerEdits'", path);
        if (fj_str(name) == NULL)
            return xf_say(XF_ERR, "spec '%s': a device name holds a NUL byte", path);
        if (check_edits(ce, path, name->str) != XF_OK)
            return XF_ERR;
    }
    edits = fj_get(spec, "containerEdits");
    if (edits != NULL && edits->type != FJ_NULL) {
        if (edits->type != FJ_OBJECT)
            return xf_say(XF_ERR, "spec '%s': 'containerEdits' must be an object", path);
        if (check_edits(edits, path, NULL) != XF_OK)
            return XF_ERR;
    }
    return XF_OK;
}

/* The parsed spec (JSON, or YAML through libyaml, typed as the CDI Go
 * library reads it); XF_ERR with the line to report. */
static int read_spec(const char *path, const fj **spec)
{
    char *data, err[512];
    size_t len;
    struct stat st;
    int yaml = xf_ends_with(path, ".yaml");

    switch (xf_read_regular(path, MAX_SPEC_BYTES, &data, &len, &st)) {
    case RD_ABSENT: /* removed since the listing */
        xf_say(XF_ERR, "%s", strerror(ENOENT));
        /* fall through */
    case RD_UNREADABLE:
        return xf_wrap(XF_ERR, "spec '%s': cannot read", path);
    case RD_REFUSED:
        if (S_ISREG(st.st_mode) && (size_t)st.st_size > MAX_SPEC_BYTES)
            return xf_say(XF_ERR, "spec '%s': %lld bytes is over the %zu-byte limit", path, (long long)st.st_size,
                          MAX_SPEC_BYTES);
        return xf_wrap(XF_ERR, "spec '%s'", path);
    }
    if (yaml && !fy_load_library(err, sizeof(err)))
        return xf_say(XF_ERR, "spec '%s' cannot be read: %s", path, err);
    *spec = yaml ? fy_parse(data, len, FY_CDI_SPEC, err, sizeof(err)) : fj_parse(data, len, err, sizeof(err));
    if (*spec == NULL)
        return xf_say(XF_ERR, "spec '%s': not valid %s: %s", path, yaml ? "YAML" : "JSON", err);
    return XF_OK;
}

/* One spec dir into all (q -> struct device), replacing earlier dirs'
 * devices.  A file that cannot be read or checked is skipped and named in
 * xf_spec_problems; so is a device two files of the dir define (both
 * dropped: which one is meant cannot be told).  The others still count. */
void xf_load_spec_dir(const char *d, struct xf_strmap *all)
{
    char **names;
    size_t n;
    int rv = xf_list_dir(d, &names, &n);
    struct xf_strmap found = {0}, conflicts = {0};  /* q -> struct device; q -> "'p1', 'p2'" */
    struct xf_ptrvec order = {0};                   /* conflicting q, in the order found */

    if (rv == -ENOENT)
        return;
    if (rv != 0) {
        problem(xf_printf("spec dir '%s': cannot list: %s", d, strerror(-rv)));
        return;
    }
    if (n > MAX_FILES) {
        problem(xf_printf("spec dir '%s': %zu entries, only the first %d read", d, n, MAX_FILES));
        n = MAX_FILES;
    }
    for (size_t i = 0; i < n; i++) {
        const fj *doc, *kind = NULL, *devices = NULL;
        struct spec *spec;
        if (!xf_ends_with(names[i], ".json") && !xf_ends_with(names[i], ".yaml"))
            continue;
        spec = xf_alloc(sizeof(*spec));
        spec->path = xf_path_join(d, names[i]);
        if (read_spec(spec->path, &doc) != XF_OK || check_spec(doc, spec->path, &kind, &devices) != XF_OK) {
            problem(xf_reason);
            continue;
        }
        spec->edits = fj_get(doc, "containerEdits");
        if (spec->edits != NULL && spec->edits->type != FJ_OBJECT)
            spec->edits = NULL;
        for (size_t j = 0; j < devices->n; j++) {
            const fj *name = fj_get(devices->items[j], "name");
            struct device *dev;
            const struct device *was;
            char *q = xf_strcat3(kind->str, "=", name->str);
            if ((was = xf_strmap_get(&found, q)) != NULL) {
                const char *paths = xf_strmap_get(&conflicts, q);
                if (paths == NULL) {
                    paths = xf_printf("'%s'", was->spec->path);
                    xf_ptrvec_add(&order, q);
                }
                xf_strmap_put(&conflicts, q, xf_printf("%s, '%s'", paths, spec->path));
                continue;
            }
            dev = xf_alloc(sizeof(*dev));
            dev->spec = spec;
            dev->edits = fj_get(devices->items[j], "containerEdits");
            xf_strmap_put(&found, q, dev);
        }
    }
    for (size_t i = 0; i < order.n; i++) {
        const char *q = order.v[i];
        problem(xf_printf("conflicting device '%s' in %s: both dropped; keep it in one file", q,
                          (const char *)xf_strmap_get(&conflicts, q)));
    }
    for (size_t i = 0; i < found.cap; i++)
        if (found.keys[i] != NULL && xf_strmap_get(&conflicts, found.keys[i]) == NULL)
            xf_strmap_put(all, found.keys[i], found.vals[i]);
    free(found.keys);
    free(found.vals);
}
