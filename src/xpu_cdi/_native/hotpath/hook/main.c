/* xpu-cdi-hook: argv, the subcommands and the one-line error (docs/hook.md).
 * prestart: OCI state -> config.json -> selected devices -> merged edits ->
 * inject; update-ldcache and create-symlinks: the spec's own hooks (tool()).
 * Nothing from the container's environment reaches this process's own:
 * process.env is parsed as data only (lib/selection.c). */
#include "lib/common.h"
#include "lib/json.h"
#include "hook/prestart/inject.h"
#include "lib/node_config.h"
#include "hook/ocistate.h"
#include "lib/privileged.h"
#include "hook/prestart/plan.h"
#include "hook/stage.h"
#include "lib/request.h"
#include "lib/collections.h"
#include "lib/files.h"
#include "lib/may_request.h"
#include "lib/strings.h"
#include "lib/version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "xpu-cdi-hook"

static const char *log_path;   /* --log FILE, or NULL (an empty FILE too: Log("") writes nothing) */
static const char *container_id = "-";
static int log_fd = -1;

/* The log opened (and the local time zone read) where the hook started:
 * called before xf_inject joins the container's mount namespace, which
 * the hook does not leave again (struct xf_container.exits), so that no
 * path of the log is ever looked up there.  A log that cannot be opened
 * is warned about once and not tried again. */
static void log_open(void)
{
    if (log_fd >= 0 || log_path == NULL || log_path[0] == '\0')
        return;
    tzset();
    log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (log_fd < 0) {
        fprintf(stderr, "%s: warning: cannot write log '%s': %s\n", PROG, log_path, strerror(errno));
        log_path = NULL;
    }
}

/* One line to --log. */
static void log_line(const char *message)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    char *line;

    if (log_path == NULL || log_path[0] == '\0')
        return;
    if (localtime_r(&now, &tm) == NULL || strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        strcpy(stamp, "-");
    line = xf_printf("%s %s[%d] %s: %s\n", stamp, PROG, (int)getpid(), container_id, message);
    log_open();
    if (log_fd >= 0 && write(log_fd, line, strlen(line)) < 0)
        fprintf(stderr, "%s: warning: cannot write log '%s': %s\n", PROG, log_path, strerror(errno));
}

struct request {
    char *state_text;
    size_t state_len;
    struct xf_container c;
    const fj *env, *ann_state, *ann_config, *config;
    const char *config_text;
    size_t config_len;
};

/* The state and config.json of a prestart request (ocistate.c; worded refusals). */
static int load_container(struct request *r)
{
    struct xf_oci o;

    if (xf_oci_load(r->state_text, r->state_len, &o) != XF_OK)
        return XF_ERR;
    r->c.id = container_id = o.id;
    r->c.pid = o.pid;
    r->c.rootfs = o.rootfs;
    r->env = o.env;
    r->ann_state = o.ann_state;
    r->ann_config = o.ann_config;
    r->config = o.config;
    r->config_text = o.config_text;
    r->config_len = o.config_len;
    return XF_OK;
}

#define USAGE "usage: " PROG " [--spec-dir DIR]... [--log FILE] [--config FILE] prestart\n" \
              "       " PROG " [--log FILE] update-ldcache --folder DIR...\n" \
              "       " PROG " [--log FILE] create-symlinks --link TARGET::LINK...\n" \
              "       " PROG " --version\n"
#define SEE_USAGE "(see `" PROG " --help`)"

/* One line to stderr (runc shows it to the user) and to the log; exit 1. */
static int fail(const char *message)
{
    fprintf(stderr, "%s: %s\n", PROG, message);
    log_line(xf_printf("error: %s", message));
    return 1;
}

/* update-ldcache / create-symlinks as a spec hook of their own: what a
 * CDI runtime runs as a createContainer hook (already in the container's
 * namespaces), or, registered as prestart, joined to the container like
 * the prestart injection (stage.h).  The work is the prestart path's own
 * (xf_inject on the one spec hook), so both registrations behave alike.
 * Every error is final here: worded, nothing left behind. */
static int tool(const char *sub, char **args, size_t nargs)
{
    struct xf_hook hook;
    struct xf_edits edits;
    struct xf_oci o;
    struct xf_container c;
    enum xf_stage stage;
    char *text;
    size_t len;
    const char *note;
    int rv;

    memset(&hook, 0, sizeof(hook));
    hook.path = PROG;
    hook.nargs = nargs + 2;
    hook.args = xf_alloc(hook.nargs * sizeof(*hook.args));
    hook.args[0] = PROG;
    hook.args[1] = sub;
    for (size_t i = 0; i < nargs; i++)
        hook.args[i + 2] = args[i];
    memset(&edits, 0, sizeof(edits));
    edits.hooks = &hook;
    edits.nhooks = 1;
    {   /* the arguments first: a usage error needs no state (xf_inject plans again, cheaply) */
        struct xf_plan p;
        if (xf_plan_make(&edits, &p) != XF_OK)
            return fail(xf_reason);
    }

    if (xf_oci_read_state(0, &text, &len) != XF_OK || xf_oci_load(text, len, &o) != XF_OK)
        return fail(xf_reason);
    container_id = o.id;
    if (xf_stage_of(o.pid, &stage) != XF_OK)
        return fail(xf_reason);
    memset(&c, 0, sizeof(c));
    c.id = o.id;
    c.pid = o.pid;
    c.rootfs = o.rootfs;
    c.stage = stage;
    c.tools_note = 1;
    c.exits = 1;
    log_open();
    rv = xf_inject(&c, &edits, &note);
    if (rv != XF_OK)
        return fail(xf_reason);
    log_line(xf_printf("%s: %s", sub, note));
    return 0;
}

/* prestart: inject the devices the container asked for. */
static int prestart(const char *const *given, size_t ngiven, const char *config_path)
{
    const char **dirs, **names, *ignored, *note;
    struct xf_config cfg;
    size_t ndirs, nnames;
    struct request r;
    struct xf_indexes ix;
    struct xf_edits edits;
    int rv;

    memset(&r, 0, sizeof(r));
    if (xf_config_load(config_path, &cfg) != XF_OK)
        return fail(xf_reason); /* fail closed: the setting may forbid what is asked */
    if (xf_spec_dirs(given, ngiven, getenv("XPU_CDI_SPEC_DIRS"), &dirs, &ndirs) != XF_OK)
        return fail(xf_reason);
    xf_prefetch_indexes(dirs, ndirs); /* while the runtime writes the state: they do not depend on it */
    if (xf_oci_read_state(0, &r.state_text, &r.state_len) != XF_OK || load_container(&r) != XF_OK)
        return fail(xf_reason);
    if (!xf_may_request(r.config_text, r.config_len, dirs, ndirs) &&
        memmem(r.state_text, r.state_len, "cdi.k8s.io", 10) == NULL)
        return 0; /* nothing can be asked (most containers): no index parsed */
    if (xf_load_indexes(dirs, ndirs, &ix) != XF_OK)
        return fail(xf_reason);
    if (!cfg.accept_env_when_unprivileged && !xf_privileged(r.config) && (ignored = xf_selection_var(&ix, r.env))) {
        log_line(xf_printf("%s ignored: the container is not privileged and %s sets %s: false (select devices "
                           "with cdi.k8s.io/ annotations)", ignored, cfg.path, XF_CONFIG_KEY_ENV_UNPRIVILEGED));
        r.env = NULL;
    }
    if (xf_requested(&ix, r.env, r.ann_state, r.ann_config, &names, &nnames) != XF_OK)
        return fail(xf_reason);
    if (nnames == 0)
        return 0; /* nothing asked for: touch nothing */
    rv = xf_resolve(dirs, ndirs, names, nnames, &edits);
    for (size_t i = 0; i < xf_nspec_problems; i++)
        log_line(xf_printf("warning: %s", xf_spec_problems[i]));
    if (rv != XF_OK)
        return fail(xf_reason);
    if (xf_stage_of(r.c.pid, &r.c.stage) != XF_OK)
        return fail(xf_reason);
    if (r.c.stage == XF_STAGE_INSIDE)
        return fail(xf_printf("OCI state pid %d is not a container process of this runtime (a createContainer "
                              "hook runs inside the container): register `xpu-cdi-hook prestart` as a prestart "
                              "or createRuntime hook", r.c.pid));
    r.c.exits = 1;
    log_open();
    if (xf_inject(&r.c, &edits, &note) != XF_OK)
        return fail(xf_reason); /* undone (XF_ERR), or said what is left (XF_FAIL) */
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

int main(int argc, char **argv)
{
    const char **given = xf_alloc((size_t)(argc > 0 ? argc : 1) * sizeof(*given)), *sub = NULL, *config_path = NULL;
    char **rest = xf_alloc((size_t)(argc > 0 ? argc : 1) * sizeof(*rest));
    size_t nrest = 0, ngiven = 0;

    /* --spec-dir/--log/--config anywhere, as "--opt V" or "--opt=V" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = NULL;
        int is_dir = strncmp(a, "--spec-dir", 10) == 0 && (a[10] == '\0' || a[10] == '=');
        int is_log = strncmp(a, "--log", 5) == 0 && (a[5] == '\0' || a[5] == '=');
        int is_config = strncmp(a, "--config", 8) == 0 && (a[8] == '\0' || a[8] == '=');
        if (is_dir || is_log || is_config) {
            const char *eq = strchr(a, '=');
            if (eq != NULL)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return fail(xf_printf("option %s needs a value %s", a, SEE_USAGE));
            if (is_config)
                config_path = value;
            else if (is_dir)
                given[ngiven++] = value;
            else
                log_path = value;
        } else if (sub == NULL) {
            sub = a;
        } else {
            rest[nrest++] = argv[i];
        }
    }
    if (sub != NULL && (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (sub != NULL && strcmp(sub, "--version") == 0) {
        fputs(XF_VERSION_LINE(PROG), stdout);
        return 0;
    }
    if (sub != NULL && (strcmp(sub, "update-ldcache") == 0 || strcmp(sub, "create-symlinks") == 0))
        return tool(sub, rest, nrest);
    if (sub != NULL && strcmp(sub, "prestart") == 0) {
        if (nrest > 0)
            return fail(xf_printf("prestart: unexpected argument %s %s", xf_quoted_short(rest[0], strlen(rest[0])),
                                  SEE_USAGE));
        return prestart(given, ngiven, config_path);
    }
    if (sub == NULL)
        return fail("no subcommand given: register `" PROG " prestart` as the hook " SEE_USAGE);
    if (sub[0] == '-')
        return fail(xf_printf("unknown option %s %s", xf_quoted_short(sub, strlen(sub)), SEE_USAGE));
    /* An unknown subcommand: warn and succeed.  Specs written by a newer
     * xpu-cdi may name hooks this binary does not know; failing would stop
     * every such container from starting (nvidia-cdi-hook does the same). */
    fprintf(stderr, "%s: warning: unknown subcommand %s ignored (this is %s from an older release?)\n", PROG,
            xf_quoted_short(sub, strlen(sub)), PROG);
    log_line(xf_printf("warning: unknown subcommand %s ignored", xf_quoted_short(sub, strlen(sub))));
    return 0;
}
