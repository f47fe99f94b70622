/* xpu-cdi-fast-test ociedit: the wrapper's C parts, driven by
 * tests/native/test_ociedit.py against the Python implementation.
 *
 *   ociedit apply CONFIG_JSON EDITS_JSON   edited config, or DEFER <reason>
 *       (EDITS_JSON: registry.merge_edits' shape plus "additionalGids")
 *   ociedit split ARGS...                  {"index","command","bundle","log"}
 *   ociedit may-request CONFIG_JSON DIR... 1 or 0
 *   ociedit find-runtime SELF              the runtime's path, or DEFER <reason>
 *       (XPU_CDI_RUNTIME and PATH from the environment)
 *   ociedit spec-dirs                      one dir a line (XPU_CDI_SPEC_DIRS)
 *   ociedit write PATH MODE DATA_FILE      OK, or DEFER <reason>
 *   ociedit prepare BUNDLE                 OK <0|1 edited>, or DEFER <reason>
 *       (spec dirs from XPU_CDI_SPEC_DIRS) */
#include "ociedit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int deferred(void)
{
    printf("DEFER %s\n", xf_reason);
    return 0;
}

static int load(const char *path, fj **out)
{
    char *data, err[256];
    size_t len;

    if (xf_read_file(path, XF_MAX_CONFIG_BYTES, &data, &len, NULL) != XF_OK)
        return XF_ERR;
    *out = fj_parse(data, len, err, sizeof(err));
    if (*out == NULL)
        return xf_say(XF_ERR, "%s: %s", path, err);
    return XF_OK;
}

/* An edit list of the edits object: absent/null is empty. */
static int list(const fj *edits, const char *key, const fj **out)
{
    const fj *v = fj_get(edits, key);

    if (v != NULL && v->type != FJ_NULL && v->type != FJ_ARRAY)
        return xf_say(XF_ERR, "edits: %s is not a list", key);
    *out = v != NULL && v->type == FJ_ARRAY ? v : NULL;
    return XF_OK;
}

/* struct xf_edits from JSON (what xf_resolve builds from the specs). */
static int edits_from_json(const fj *j, struct xf_edits *e)
{
    const fj *env = NULL, *nodes = NULL, *mounts = NULL, *hooks = NULL, *gids = NULL;

    memset(e, 0, sizeof(*e));
    if (j == NULL || j->type != FJ_OBJECT)
        return xf_say(XF_ERR, "edits: not an object");
    if (list(j, "env", &env) || list(j, "deviceNodes", &nodes) || list(j, "mounts", &mounts) ||
        list(j, "hooks", &hooks) || list(j, "additionalGids", &gids))
        return XF_ERR;
    if (env != NULL) {
        e->env = xf_alloc(env->n * sizeof(*e->env));
        for (size_t i = 0; i < env->n; i++)
            if ((e->env[e->nenv++] = fj_str(env->items[i])) == NULL)
                return xf_say(XF_ERR, "edits: env entry %zu is not a string", i);
    }
    if (nodes != NULL) {
        e->nodes = xf_alloc(nodes->n * sizeof(*e->nodes));
        for (size_t i = 0; i < nodes->n; i++) {
            e->nodes[i].json = nodes->items[i];
            e->nodes[i].path = fj_str(fj_get(nodes->items[i], "path"));
        }
        e->nnodes = nodes->n;
    }
    if (mounts != NULL) {
        e->mounts = xf_alloc(mounts->n * sizeof(*e->mounts));
        for (size_t i = 0; i < mounts->n; i++)
            e->mounts[i].json = mounts->items[i];
        e->nmounts = mounts->n;
    }
    if (hooks != NULL) {
        e->hooks = xf_alloc(hooks->n * sizeof(*e->hooks));
        for (size_t i = 0; i < hooks->n; i++)
            e->hooks[i].json = hooks->items[i];
        e->nhooks = hooks->n;
    }
    if (gids != NULL) {
        e->gids = xf_alloc(gids->n * sizeof(*e->gids));
        for (size_t i = 0; i < gids->n; i++) {
            if (gids->items[i]->type != FJ_NUMBER || !gids->items[i]->is_int)
                return xf_say(XF_ERR, "edits: additionalGids entry %zu is not an integer", i);
            e->gids[e->ngids++] = gids->items[i]->num;
        }
    }
    return XF_OK;
}

static int cmd_apply(int argc, char **argv)
{
    fj *config, *ej;
    struct xf_edits e;
    struct xf_buf out = {0};

    if (argc != 3)
        return 2;
    if (load(argv[1], &config) || load(argv[2], &ej) || edits_from_json(ej, &e) || xf_apply(config, &e) ||
        xf_serialise(config, &out))
        return deferred();
    printf("%s\n", out.data);
    return 0;
}

static void put_str(struct xf_buf *b, const char *s)
{
    if (s == NULL)
        xf_buf_adds(b, "null");
    else
        fj_write(fj_new_str(s), b);
}

static int cmd_split(int argc, char **argv)
{
    static const char *const bundle[] = {"--bundle", "-bundle", "-b"}, *const log[] = {"--log", "-log"};
    const char *command;
    int at = xf_split_command(argc - 1, argv + 1, &command);
    struct xf_buf b = {0};

    xf_buf_addf(&b, "{\"index\":%d,\"command\":", at);
    put_str(&b, command);
    xf_buf_adds(&b, ",\"bundle\":");
    put_str(&b, xf_option_value(argc - 1, argv + 1, at + 1, bundle, 3));
    xf_buf_adds(&b, ",\"log\":");
    put_str(&b, xf_option_value(argc - 1, argv + 1, 0, log, 2));
    xf_buf_adds(&b, "}");
    printf("%s\n", b.data);
    return 0;
}

static int cmd_may_request(int argc, char **argv)
{
    char *data;
    size_t len;

    if (argc < 2)
        return 2;
    if (xf_read_file(argv[1], XF_MAX_CONFIG_BYTES, &data, &len, NULL) != XF_OK)
        return deferred();
    printf("%d\n", xf_may_request(data, len, (const char *const *)argv + 2, (size_t)argc - 2));
    return 0;
}

static int cmd_find_runtime(int argc, char **argv)
{
    const char *real;

    if (argc != 2)
        return 2;
    if (xf_find_runtime(getenv("XPU_CDI_RUNTIME"), getenv("PATH"), argv[1], &real) != XF_OK)
        return deferred();
    printf("%s\n", real);
    return 0;
}

static int cmd_spec_dirs(void)
{
    const char **dirs;
    size_t n = xf_spec_dirs(getenv("XPU_CDI_SPEC_DIRS"), &dirs);

    for (size_t i = 0; i < n; i++)
        printf("%s\n", dirs[i]);
    return 0;
}

static int cmd_write(int argc, char **argv)
{
    char *data;
    size_t len;

    if (argc != 4)
        return 2;
    if (xf_read_file(argv[3], XF_MAX_CONFIG_BYTES, &data, &len, NULL) != XF_OK ||
        xf_write_atomic(argv[1], data, len, (unsigned)strtoul(argv[2], NULL, 8)) != XF_OK)
        return deferred();
    printf("OK\n");
    return 0;
}

static int cmd_prepare(int argc, char **argv)
{
    const char **dirs;
    size_t n = xf_spec_dirs(getenv("XPU_CDI_SPEC_DIRS"), &dirs);
    int edited;
    struct xf_config cfg = {XF_CONFIG_DEFAULT_PATH, 1};
    const char *ignored;

    if (argc != 2)
        return 2;
    if (xf_prepare(argv[1], dirs, n, &cfg, &edited, &ignored) != XF_OK)
        return deferred();
    printf("OK %d\n", edited);
    return 0;
}

int xf_test_ociedit(int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "";
    int rv = 2;

    if (strcmp(sub, "apply") == 0)
        rv = cmd_apply(argc - 1, argv + 1);
    else if (strcmp(sub, "split") == 0)
        rv = cmd_split(argc - 1, argv + 1);
    else if (strcmp(sub, "may-request") == 0)
        rv = cmd_may_request(argc - 1, argv + 1);
    else if (strcmp(sub, "find-runtime") == 0)
        rv = cmd_find_runtime(argc - 1, argv + 1);
    else if (strcmp(sub, "spec-dirs") == 0)
        rv = cmd_spec_dirs();
    else if (strcmp(sub, "write") == 0)
        rv = cmd_write(argc - 1, argv + 1);
    else if (strcmp(sub, "prepare") == 0)
        rv = cmd_prepare(argc - 1, argv + 1);
    if (rv == 2)
        fprintf(stderr, "usage: xpu-cdi-fast-test ociedit apply|split|may-request|find-runtime|spec-dirs|"
                        "write|prepare ARGS...\n");
    return rv;
}
