/* xpu-container-runtime, compiled front end: wrapper.main in C.
 *
 * containerd's shim runs the runtime five or more times per container
 * (create, start, state, kill, delete...), so every command but create and
 * run goes straight to the real runtime: a getenv, the PATH lookup, exec.
 * create and run edit <bundle>/config.json first (ociedit.c) when it asks
 * for devices.  Anything unusual -- the loop guard, no runtime, a request
 * or spec the C code does not take with certainty, a failed write -- execs
 * the Python wrapper (<this binary's real path>.py) with the same argv,
 * which redoes the whole job and reports errors in its own words.  stdin
 * is never read: the runtime passes it to the container. */
#include "ociedit.h"

#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "xpu-container-runtime"
#define ACTIVE_ENV "XPU_CDI_WRAPPER_ACTIVE" /* set for the real runtime: seeing it on entry means a loop */

extern char **environ;

static void defer(char **argv) __attribute__((noreturn));
static void defer(char **argv)
{
    xf_exec_python(PROG, argv, NULL, 0);
}

/* os.execve(real, [real, *args], dict(os.environ, XPU_CDI_WRAPPER_ACTIVE="1")):
 * returns only when the exec failed (the environment is left as it was). */
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
    xf_say(XF_DEFER, "cannot execute %s: %s", real, strerror(errno));
}

int main(int argc, char **argv)
{
    static const char *const bundle_options[] = {"--bundle", "-bundle", "-b"};
    const char *active = getenv(ACTIVE_ENV), *real, *command, *bundle, *config_path = NULL;
    int at;

    if (argc < 1) {
        static char *named[] = {PROG, NULL}; /* xf_exec_python replaces argv[0]: there must be one */
        defer(named);
    }
    /* --config PATH (or --config=PATH) first: the node config file
     * (config.h); taken out before the runtime sees the arguments */
    if (argc > 1 && strncmp(argv[1], "--config", 8) == 0 && (argv[1][8] == '\0' || argv[1][8] == '=')) {
        int skip = argv[1][8] == '=' ? 1 : 2;
        if (skip == 2 && argc < 3) {
            fprintf(stderr, "%s: --config needs a PATH (the node config file)\n", PROG);
            return 1;
        }
        config_path = skip == 1 ? argv[1] + 9 : argv[2];
        for (int i = 1; i + skip <= argc; i++)
            argv[i] = argv[i + skip];
        argc -= skip;
    }
    if (active != NULL && *active != '\0')
        defer(argv); /* started by itself: Python says how to fix it */
    if (xf_find_runtime(getenv("XPU_CDI_RUNTIME"), getenv("PATH"), "/proc/self/exe", &real) != XF_OK)
        defer(argv);
    at = xf_split_command(argc - 1, argv + 1, &command);
    if (command != NULL && (strcmp(command, "create") == 0 || strcmp(command, "run") == 0)) {
        char cwd[PATH_MAX];
        const char **dirs;
        size_t ndirs = xf_spec_dirs(getenv("XPU_CDI_SPEC_DIRS"), &dirs);
        int edited;
        struct xf_config cfg;
        char err[1024];
        const char *ignored;
        bundle = xf_option_value(argc - 1, argv + 1, at + 1, bundle_options, 3);
        if (bundle == NULL || *bundle == '\0') {
            if (getcwd(cwd, sizeof(cwd)) == NULL)
                defer(argv);
            bundle = cwd;
        }
        if (xf_config_load(config_path, &cfg, err, sizeof(err)) != XF_OK) {
            fprintf(stderr, "%s: %s\n", PROG, err); /* fail closed: the setting may forbid what is asked */
            return 1;
        }
        if (xf_prepare(bundle, dirs, ndirs, &cfg, &edited, &ignored) != XF_OK) {
            if (!cfg.accept_env_when_unprivileged) { /* the Python wrapper knows nothing of the setting */
                fprintf(stderr, "%s: %s\n", PROG, xf_reason);
                return 1;
            }
            defer(argv);
        }
        if (ignored != NULL)
            fprintf(stderr, "%s: warning: %s ignored: the container is not privileged and %s sets %s: false "
                    "(select devices with cdi.k8s.io/ annotations)\n", PROG, ignored, cfg.path,
                    XF_CONFIG_KEY_ENV_UNPRIVILEGED);
    }
    exec_runtime(real, argc, argv);
    defer(argv); /* Python tries again and says why it cannot */
}
