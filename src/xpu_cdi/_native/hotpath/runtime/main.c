/* xpu-container-runtime: the OCI runtime wrapper (docs/runtime-integration.md).
 * containerd's shim runs the runtime five or more times per container, so
 * every command but create and run goes straight to the real runtime (a
 * getenv, the PATH lookup, exec); create and run edit config.json first
 * (prepare.c).  Every refusal is one line on stderr and in the runtime's
 * --log (containerd's shim reports the last error there), config.json left
 * as it was.  stdin is never read: the runtime passes it to the container. */
#include "runtime/argv.h"
#include "runtime/find_runtime.h"
#include "runtime/prepare.h"
#include "lib/version.h"

#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "xpu-container-runtime"
#define ACTIVE_ENV "XPU_CDI_WRAPPER_ACTIVE" /* set for the real runtime: seeing it on entry means a loop */

extern char **environ;

/* message as a JSON string (the runtime's log lines are JSON or logfmt with a JSON-quoted msg). */
static void json_string(struct xf_buf *b, const char *s)
{
    xf_buf_adds(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            xf_buf_addf(b, "\\%c", *p);
        else if (*p < 0x20)
            xf_buf_addf(b, "\\u%04x", *p);
        else
            xf_buf_add(b, (const char *)p, 1);
    }
    xf_buf_adds(b, "\"");
}

/* One line on stderr, and in the runtime's --log file (in its --log-format) when given; exit code 1. */
static int fail(int argc, char **argv, const char *message)
{
    static const char *const log_opts[] = {"--log", "-log"}, *const fmt_opts[] = {"--log-format", "-log-format"};
    const char *log = xf_option_value(argc - 1, argv + 1, 0, log_opts, 2);
    const char *fmt = xf_option_value(argc - 1, argv + 1, 0, fmt_opts, 2);
    char *line = xf_printf("%s: %s", PROG, message), stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    fprintf(stderr, "%s\n", line);
    if (log != NULL && *log != '\0') {
        struct xf_buf b = {0};
        FILE *f;
        if (gmtime_r(&now, &tm) == NULL || strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
            strcpy(stamp, "-");
        if (fmt != NULL && strcmp(fmt, "json") == 0) {
            xf_buf_adds(&b, "{\"level\": \"error\", \"msg\": ");
            json_string(&b, line);
            xf_buf_addf(&b, ", \"time\": \"%s\"}\n", stamp);
        } else {
            xf_buf_addf(&b, "time=\"%s\" level=error msg=", stamp);
            json_string(&b, line);
            xf_buf_adds(&b, "\n");
        }
        if ((f = fopen(log, "ae")) != NULL) { /* the message is on stderr as well */
            fputs(b.data, f);
            fclose(f);
        }
    }
    return 1;
}

/* exec real with args and the environment plus XPU_CDI_WRAPPER_ACTIVE=1 (the
 * loop guard): returns only when the exec failed (the environment is left as it was). */
static void exec_runtime(const char *real, int argc, char **argv)
{
    size_t n = 0, k = 0;
    char **args = xf_alloc(((size_t)argc + 1) * sizeof(*args)), **env;

    args[0] = (char *)real;
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];
    while (environ[n] != NULL)
        n++;
    env = xf_alloc((n + 2) * sizeof(*env));
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], ACTIVE_ENV "=", sizeof(ACTIVE_ENV)) != 0)
            env[k++] = environ[i];
    env[k++] = ACTIVE_ENV "=1";
    execve(real, args, env);
    xf_say(XF_ERR, "cannot execute '%s': %s", real, strerror(errno));
}

int main(int argc, char **argv)
{
    static const char *const bundle_options[] = {"--bundle", "-bundle", "-b"};
    static const char *const version_options[] = {"--version", "-version"};
    static char *no_args[] = {PROG, NULL};
    const char *active = getenv(ACTIVE_ENV), *real, *command, *bundle, *config_path = NULL;
    int at;

    if (argc < 1) { /* execve with an empty argv (refused by kernels >= 5.18) */
        argc = 1;
        argv = no_args;
    }
    /* --config PATH (or --config=PATH) first: the node config file
     * (node_config.h); taken out before the runtime sees the arguments */
    if (argc > 1 && strncmp(argv[1], "--config", 8) == 0 && (argv[1][8] == '\0' || argv[1][8] == '=')) {
        int skip = argv[1][8] == '=' ? 1 : 2;
        if (skip == 2 && argc < 3)
            return fail(argc, argv, "--config needs a PATH (the node config file)");
        config_path = skip == 1 ? argv[1] + 9 : argv[2];
        for (int i = 1; i + skip <= argc; i++)
            argv[i] = argv[i + skip];
        argc -= skip;
    }
    /* ours, a blank line, then the real runtime's own (it gets the same arguments), as
     * nvidia-container-runtime prints its version before runc's */
    if (xf_global_flag(argc - 1, argv + 1, version_options, 2))
        fputs(XF_VERSION_LINE(PROG) "\n", stdout);
    if (active != NULL && *active != '\0')
        return fail(argc, argv, "started by itself (XPU_CDI_RUNTIME or PATH names another copy of the wrapper as "
                    "the real runtime): point XPU_CDI_RUNTIME at runc or crun");
    if (xf_find_runtime(getenv("XPU_CDI_RUNTIME"), getenv("PATH"), "/proc/self/exe", &real) != XF_OK)
        return fail(argc, argv, xf_reason);
    at = xf_split_command(argc - 1, argv + 1, &command);
    if (command != NULL && (strcmp(command, "create") == 0 || strcmp(command, "run") == 0)) {
        char cwd[PATH_MAX];
        const char **dirs;
        size_t ndirs;
        int edited, rv;
        struct xf_config cfg;
        const char *ignored;
        bundle = xf_option_value(argc - 1, argv + 1, at + 1, bundle_options, 3);
        if (bundle == NULL || *bundle == '\0') {
            if (getcwd(cwd, sizeof(cwd)) == NULL)
                return fail(argc, argv, xf_printf("cannot find the bundle: no --bundle given and the current "
                                                  "directory is unknown: %s", strerror(errno)));
            bundle = cwd;
        }
        if (xf_spec_dirs(NULL, 0, getenv("XPU_CDI_SPEC_DIRS"), &dirs, &ndirs) != XF_OK)
            return fail(argc, argv, xf_reason);
        if (xf_config_load(config_path, &cfg) != XF_OK)
            return fail(argc, argv, xf_reason); /* fail closed: the setting may forbid what is asked */
        rv = xf_prepare(bundle, dirs, ndirs, &cfg, &edited, &ignored);
        for (size_t i = 0; i < xf_nspec_problems; i++)
            fprintf(stderr, "%s: warning: %s\n", PROG, xf_spec_problems[i]);
        if (rv != XF_OK)
            return fail(argc, argv, xf_reason);
        if (ignored != NULL)
            fprintf(stderr, "%s: warning: %s ignored: the container is not privileged and %s sets %s: false "
                    "(select devices with cdi.k8s.io/ annotations)\n", PROG, ignored, cfg.path,
                    XF_CONFIG_KEY_ENV_UNPRIVILEGED);
    }
    fflush(stdout);
    exec_runtime(real, argc, argv);
    return fail(argc, argv, xf_reason);
}
