/* xpu-cdi-fast-test request: select.c, names.c and registry.c (request.h)
 * against the Python code (tests/native/test_request.py).  Each answer is
 * one line: JSON, or "DEFER <reason>".
 *
 *   request indexes DIR...              {kind: index, ...} (select.load_indexes)
 *   request requested DIR... < LINES    per line {"env": [...], "annState": {...},
 *                                       "annConfig": {...}}: the JSON list of
 *                                       names (select.requested)
 *   request resolve DIR... -- NAME...   registry.merge_edits of the names, plus
 *                                       additionalGids, unsupported and the
 *                                       struct fields ("fields") */
#include "request.h"

#include <stdio.h>
#include <string.h>

static void defer_line(void)
{
    for (char *p = xf_reason; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    printf("DEFER %s\n", xf_reason);
}

static void print_json(const fj *v)
{
    struct xf_buf b = {0};

    fj_write(v, &b);
    printf("%s\n", b.data);
}

static int indexes(const char *const *dirs, size_t ndirs)
{
    struct xf_indexes ix;
    fj *out = fj_new(FJ_OBJECT);

    if (xf_load_indexes(dirs, ndirs, &ix) != XF_OK) {
        defer_line();
        return 0;
    }
    for (size_t i = 0; i < ix.n; i++)
        fj_set(out, ix.items[i].kind, (fj *)ix.items[i].json);
    print_json(out);
    return 0;
}

static int requested(const char *const *dirs, size_t ndirs)
{
    struct xf_indexes ix;
    char *text, *line, *save = NULL, err[256];
    size_t len;
    int loaded;

    if (xf_read_fd(0, (size_t)64 << 20, &text, &len) != XF_OK) {
        fprintf(stderr, "request requested: %s\n", xf_reason);
        return 2;
    }
    loaded = xf_load_indexes(dirs, ndirs, &ix) == XF_OK;
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const fj *doc = fj_parse(line, strlen(line), err, sizeof(err));
        const char **names;
        size_t n;
        fj *out;
        if (doc == NULL || doc->type != FJ_OBJECT) {
            fprintf(stderr, "request requested: bad input line: %s\n", doc ? "not an object" : err);
            return 2;
        }
        if (!loaded) {
            xf_load_indexes(dirs, ndirs, &ix); /* the reason again */
            defer_line();
            continue;
        }
        if (xf_requested(&ix, fj_get(doc, "env"), fj_get(doc, "annState"), fj_get(doc, "annConfig"), &names,
                         &n) != XF_OK) {
            defer_line();
            continue;
        }
        out = fj_new(FJ_ARRAY);
        for (size_t i = 0; i < n; i++)
            fj_append(out, fj_new_str(names[i]));
        print_json(out);
    }
    return 0;
}

static fj *strings(const char *const *v, size_t n)
{
    fj *a = fj_new(FJ_ARRAY);

    for (size_t i = 0; i < n; i++)
        fj_append(a, fj_new_str(v[i]));
    return a;
}

static void set_str(fj *obj, const char *key, const char *value)
{
    if (value != NULL)
        fj_set(obj, key, fj_new_str(value));
}

/* The struct as JSON, in the spec's field names: compared with the entries. */
static fj *fields(const struct xf_edits *e)
{
    static const struct {
        const char *key;
        unsigned bit;
        size_t off;
    } ints[] = {
        {"major", XF_HAS_MAJOR, offsetof(struct xf_node, major)},
        {"minor", XF_HAS_MINOR, offsetof(struct xf_node, minor)},
        {"fileMode", XF_HAS_MODE, offsetof(struct xf_node, mode)},
        {"uid", XF_HAS_UID, offsetof(struct xf_node, uid)},
        {"gid", XF_HAS_GID, offsetof(struct xf_node, gid)},
    };
    fj *out = fj_new(FJ_OBJECT), *nodes = fj_new(FJ_ARRAY), *mounts = fj_new(FJ_ARRAY), *hooks = fj_new(FJ_ARRAY);

    for (size_t i = 0; i < e->nnodes; i++) {
        const struct xf_node *n = &e->nodes[i];
        fj *o = fj_new(FJ_OBJECT);
        char type[2] = {n->type, '\0'};
        set_str(o, "path", n->path);
        set_str(o, "hostPath", n->host_path);
        if (n->type != 0)
            set_str(o, "type", type);
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
            if (n->present & ints[k].bit)
                fj_set(o, ints[k].key, fj_new_int(*(const long long *)((const char *)n + ints[k].off)));
        set_str(o, "permissions", n->permissions);
        fj_append(nodes, o);
    }
    for (size_t i = 0; i < e->nmounts; i++) {
        const struct xf_mount *m = &e->mounts[i];
        fj *o = fj_new(FJ_OBJECT);
        set_str(o, "hostPath", m->host_path);
        set_str(o, "containerPath", m->container_path);
        set_str(o, "type", m->type);
        if (m->options != NULL)
            fj_set(o, "options", strings(m->options, m->noptions));
        fj_append(mounts, o);
    }
    for (size_t i = 0; i < e->nhooks; i++) {
        const struct xf_hook *h = &e->hooks[i];
        fj *o = fj_new(FJ_OBJECT);
        set_str(o, "hookName", h->hook_name);
        set_str(o, "path", h->path);
        if (h->args != NULL)
            fj_set(o, "args", strings(h->args, h->nargs));
        fj_append(hooks, o);
    }
    fj_set(out, "deviceNodes", nodes);
    fj_set(out, "mounts", mounts);
    fj_set(out, "hooks", hooks);
    return out;
}

static int resolve(const char *const *dirs, size_t ndirs, const char *const *names, size_t n)
{
    struct xf_edits e;
    fj *out = fj_new(FJ_OBJECT), *nodes = fj_new(FJ_ARRAY), *mounts = fj_new(FJ_ARRAY), *hooks = fj_new(FJ_ARRAY),
       *gids = fj_new(FJ_ARRAY);

    if (xf_resolve(dirs, ndirs, names, n, &e) != XF_OK) {
        defer_line();
        return 0;
    }
    for (size_t i = 0; i < e.nnodes; i++)
        fj_append(nodes, (fj *)e.nodes[i].json);
    for (size_t i = 0; i < e.nmounts; i++)
        fj_append(mounts, (fj *)e.mounts[i].json);
    for (size_t i = 0; i < e.nhooks; i++)
        fj_append(hooks, (fj *)e.hooks[i].json);
    for (size_t i = 0; i < e.ngids; i++)
        fj_append(gids, fj_new_int(e.gids[i]));
    fj_set(out, "env", strings(e.env, e.nenv));
    fj_set(out, "deviceNodes", nodes);
    fj_set(out, "mounts", mounts);
    fj_set(out, "hooks", hooks);
    fj_set(out, "additionalGids", gids);
    fj_set(out, "unsupported", e.unsupported ? fj_new_str(e.unsupported) : fj_new(FJ_NULL));
    fj_set(out, "fields", fields(&e));
    fj_set(out, "problems", strings(xf_spec_problems, xf_nspec_problems));
    print_json(out);
    return 0;
}

int xf_test_request(int argc, char **argv)
{
    const char **dirs = (const char **)argv + 2;
    size_t ndirs = 0;

    if (argc < 2)
        goto usage;
    while (2 + ndirs < (size_t)argc && strcmp(argv[2 + ndirs], "--") != 0)
        ndirs++;
    if (strcmp(argv[1], "indexes") == 0)
        return indexes(dirs, ndirs);
    if (strcmp(argv[1], "requested") == 0)
        return requested(dirs, ndirs);
    if (strcmp(argv[1], "resolve") == 0 && 2 + ndirs < (size_t)argc)
        return resolve(dirs, ndirs, (const char **)argv + 3 + ndirs, (size_t)argc - 3 - ndirs);
usage:
    fprintf(stderr, "usage: xpu-cdi-fast-test request indexes DIR... | requested DIR... < LINES | "
                    "resolve DIR... -- NAME...\n");
    return 2;
}
