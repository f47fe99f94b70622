/* xpu-cdi-hook: the compiled front end of the OCI prestart hook.
 *
 *   OCI state (stdin) -> config.json -> selected devices -> merged edits -> inject
 *
 * the same flow as xpu_cdi/hook/main.py::prestart, for the common case:
 * a container that asks for nothing costs one read of its config.json
 * and the small hook indexes; one that asks for cards of our JSON specs is
 * injected here.  Everything else -- other subcommands, bad input, YAML
 * specs, a failed injection that was undone -- is handed to the Python
 * implementation (<this binary's real path>.py) with the same arguments
 * and the same state on stdin: it is the reference, and it words every
 * error.  The one failure reported here is an injection that could not be
 * undone (retrying could not make it whole).
 *
 * Nothing from the container's environment reaches this process's own:
 * process.env is parsed as data only (select.c). */
#include "common.h"
#include "fjson.h"
#include "inject.h"
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "xpu-cdi-hook"
#define MAX_STATE_BYTES (1u << 20)  /* as state.MAX_STATE_BYTES */
/* Python reads config.json up to 32 MiB (state.MAX_CONFIG_BYTES); the tree
 * here costs up to ~50 bytes per input byte for hostile input ([0,0,...]),
 * so bigger files (real ones are 5-50 KB) go to the Python hook. */
#define MAX_CONFIG_BYTES (2u << 20)
#define MAX_DIRS 64

static const char *log_path;   /* --log FILE, or NULL (an empty FILE too: Log("") writes nothing) */
static const char *container_id = "-";

/* One line to --log, as hook/main.py's Log.write. */
static void log_line(const char *message)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    char *line;
    int fd;

    if (log_path == NULL || log_path[0] == '\0')
        return;
    if (localtime_r(&now, &tm) == NULL || strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        strcpy(stamp, "-");
    line = xf_printf("%s %s[%d] %s: %s\n", stamp, PROG, (int)getpid(), container_id, message);
    fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0 || write(fd, line, strlen(line)) < 0)
        fprintf(stderr, "%s: warning: cannot write log '%s': %s\n", PROG, log_path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* os.path.normpath of an absolute path (the bundle is absolute, so is the join). */
static char *normpath(const char *path)
{
    size_t n = strlen(path), top = 0;
    const char **parts = xf_alloc((n / 2 + 2) * sizeof(*parts));
    size_t *lens = xf_alloc((n / 2 + 2) * sizeof(*lens));
    struct xf_buf b = {0};
    int slashes = (path[0] == '/' && path[1] == '/' && path[2] != '/') ? 2 : 1;
    const char *p = path;

    while (*p) {
        size_t len;
        while (*p == '/')
            p++;
        len = strcspn(p, "/");
        if (len == 0)
            break;
        if (len == 1 && p[0] == '.') {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (top > 0)
                top--;
        } else {
            parts[top] = p;
            lens[top++] = len;
        }
        p += len;
    }
    xf_buf_add(&b, "//", (size_t)slashes);
    for (size_t i = 0; i < top; i++) {
        if (i)
            xf_buf_add(&b, "/", 1);
        xf_buf_add(&b, parts[i], lens[i]);
    }
    return b.data;
}

struct request {
    char *state_text;
    size_t state_len;
    struct xf_container c;
    const fj *env, *ann_state, *ann_config;
};

/* state.parse_state + read_config + container, for valid input only. */
static int load_container(struct request *r)
{
    char err[256], *config_text, *config_path;
    size_t config_len;
    fj *state, *config, *v, *root, *path = NULL, *process;
    const char *bundle;

    state = fj_parse(r->state_text, r->state_len, err, sizeof(err));
    if (state == NULL || state->type != FJ_OBJECT)
        return xf_say(XF_DEFER, "OCI state: %s", state ? "not an object" : err);
    v = fj_get(state, "id");
    if (fj_str(v) == NULL || v->len == 0)
        return xf_say(XF_DEFER, "OCI state: no usable id");
    r->c.id = container_id = fj_str(v);
    bundle = fj_str(fj_get(state, "bundle"));
    if (bundle == NULL || bundle[0] != '/')
        return xf_say(XF_DEFER, "OCI state: bundle is not an absolute path");
    v = fj_get(state, "pid");
    if (v == NULL)
        r->c.pid = 0;
    else if (v->type == FJ_NUMBER && v->is_int && v->num >= 0 && v->num <= 0x7fffffff)
        r->c.pid = (int)v->num;
    else
        return xf_say(XF_DEFER, "OCI state: pid is not a usable integer");
    v = fj_get(state, "annotations");
    if (v != NULL && v->type != FJ_NULL && v->type != FJ_OBJECT)
        return xf_say(XF_DEFER, "OCI state: annotations is not an object");
    r->ann_state = (v && v->type == FJ_OBJECT) ? v : NULL;

    config_path = xf_printf("%s/config.json", bundle);
    if (xf_read_file(config_path, MAX_CONFIG_BYTES, &config_text, &config_len, NULL) != XF_OK)
        return XF_DEFER;
    config = fj_parse(config_text, config_len, err, sizeof(err));
    if (config == NULL || config->type != FJ_OBJECT)
        return xf_say(XF_DEFER, "%s: %s", config_path, config ? "not an object" : err);
    root = fj_get(config, "root");
    if (root != NULL && root->type == FJ_OBJECT)
        path = fj_get(root, "path");
    if (path == NULL || path->type == FJ_NULL)
        path = fj_get(state, "root"); /* crun's state */
    if (fj_str(path) == NULL || path->len == 0)
        return xf_say(XF_DEFER, "no root.path in config.json");
    r->c.rootfs = normpath(fj_str(path)[0] == '/' ? fj_str(path) : xf_printf("%s/%s", bundle, fj_str(path)));

    /* env = (config.get("process") or {}).get("env") when process is an object; null is [] */
    process = fj_get(config, "process");
    r->env = NULL;
    if (process != NULL && process->type == FJ_OBJECT) {
        v = fj_get(process, "env");
        if (v != NULL && v->type != FJ_NULL && v->type != FJ_ARRAY)
            return xf_say(XF_DEFER, "process.env is not a list");
        r->env = (v && v->type == FJ_ARRAY) ? v : NULL;
    }
    v = fj_get(config, "annotations");
    if (v != NULL && v->type != FJ_NULL && v->type != FJ_OBJECT)
        return xf_say(XF_DEFER, "config.json: annotations is not an object");
    r->ann_config = (v && v->type == FJ_OBJECT) ? v : NULL;
    return XF_OK;
}

/* --spec-dir values, else $XPU_CDI_SPEC_DIRS (the hook's own env), else the
 * defaults; 0 when there are more than MAX_DIRS (Python reads them all, and
 * a later dir wins: dropping the rest could answer "nothing asked"). */
static size_t spec_dirs(const char **given, size_t ngiven, const char **dirs)
{
    const char *env;
    size_t n = 0;

    if (ngiven > 0) {
        memcpy(dirs, given, ngiven * sizeof(*dirs));
        return ngiven;
    }
    env = getenv("XPU_CDI_SPEC_DIRS");
    if (env != NULL) {
        char *copy = xf_strdup(env), *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
            if (n == MAX_DIRS)
                return 0;
            dirs[n++] = d;
        }
    }
    if (n == 0) {
        dirs[n++] = "/etc/cdi";
        dirs[n++] = "/var/run/cdi";
    }
    return n;
}

static void defer(char **argv, const struct request *r)
{
    if (xf_reason[0] != '\0')
        log_line(xf_printf("fast path: deferring to the Python hook: %s", xf_reason));
    xf_exec_python(PROG, argv, r ? r->state_text : NULL, r ? r->state_len : 0);
}

int main(int argc, char **argv)
{
    const char *given[MAX_DIRS], *dirs[MAX_DIRS], *sub = NULL, **names;
    size_t ngiven = 0, ndirs, nnames;
    struct request r;
    struct xf_indexes ix;
    struct xf_edits edits;
    const char *note;
    int rv, extra = 0;

    if (argc < 1) { /* execve with an empty argv (refused by kernels >= 5.18) */
        static char *named[] = {PROG, NULL}; /* xf_exec_python replaces argv[0]: there must be one */
        defer(named, NULL);
    }
    /* hook/main.py::_split: --spec-dir/--log anywhere, as "--opt V" or "--opt=V" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        int is_dir = strncmp(a, "--spec-dir", 10) == 0 && (a[10] == '\0' || a[10] == '=');
        int is_log = strncmp(a, "--log", 5) == 0 && (a[5] == '\0' || a[5] == '=');
        if (is_dir || is_log) {
            const char *eq = strchr(a, '=');
            if (eq != NULL)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                defer(argv, NULL); /* a missing value: Python says so */
            if (is_dir && ngiven < MAX_DIRS)
                given[ngiven++] = value;
            else if (is_dir)
                defer(argv, NULL);
            else
                log_path = value;
        } else if (sub == NULL) {
            sub = a;
        } else {
            extra = 1;
        }
    }
    if (sub == NULL || strcmp(sub, "prestart") != 0 || extra)
        defer(argv, NULL); /* help, the spec's tool hooks, install-launcher, usage errors */

    memset(&r, 0, sizeof(r));
    /* up to limit + 1 bytes, as state.read_limited: handed on, an oversized
     * state gets the Python hook's own refusal */
    if (xf_read_fd(0, MAX_STATE_BYTES, &r.state_text, &r.state_len) != XF_OK || load_container(&r) != XF_OK)
        defer(argv, &r);
    ndirs = spec_dirs(given, ngiven, dirs);
    if (ndirs == 0) {
        xf_say(XF_DEFER, "more than %d spec dirs in XPU_CDI_SPEC_DIRS", MAX_DIRS);
        defer(argv, &r);
    }
    if (xf_load_indexes(dirs, ndirs, &ix) != XF_OK ||
        xf_requested(&ix, r.env, r.ann_state, r.ann_config, &names, &nnames) != XF_OK)
        defer(argv, &r);
    if (nnames == 0)
        return 0; /* nothing asked for: touch nothing */
    if (xf_resolve(dirs, ndirs, names, nnames, &edits) != XF_OK)
        defer(argv, &r);
    if (r.c.pid <= 1) {
        xf_say(XF_DEFER, "OCI state pid %d is not a container process", r.c.pid);
        defer(argv, &r);
    }
    rv = xf_inject(&r.c, &edits, &note);
    if (rv == XF_DEFER)
        defer(argv, &r);
    if (rv != XF_OK) {
        fprintf(stderr, "%s: %s\n", PROG, xf_reason);
        log_line(xf_printf("error: %s", xf_reason));
        return 1;
    }
    {
        struct xf_buf line = {0};
        xf_buf_adds(&line, "injected ");
        for (size_t i = 0; i < nnames; i++)
            xf_buf_addf(&line, "%s%s", i ? ", " : "", names[i]);
        xf_buf_addf(&line, ": %s", note);
        log_line(line.data);
    }
    return 0;
}
