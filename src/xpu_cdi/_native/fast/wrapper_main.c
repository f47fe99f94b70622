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
    const char *active = getenv(ACTIVE_ENV), *real, *command, *bundle;
    int at;

    if (argc < 1) {
        static char *named[] = {PROG, NULL}; /* xf_exec_python replaces argv[0]: there must be one */
        defer(named);
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
        bundle = xf_option_value(argc - 1, argv + 1, at + 1, bundle_options, 3);
        if (bundle == NULL || *bundle == '\0') {
            if (getcwd(cwd, sizeof(cwd)) == NULL)
                defer(argv);
            bundle = cwd;
        }
        if (xf_prepare(bundle, dirs, ndirs, &edited) != XF_OK)
            defer(argv);
    }
    exec_runtime(real, argc, argv);
    defer(argv); /* Python tries again and says why it cannot */
}
