/* See argv.h. */
#include "runtime/argv.h"

#include <string.h>

/* runc's and crun's global options that take the next argument (_VALUE_OPTIONS) */
static int takes_value(const char *arg)
{
    static const char *const opts[] = {"--root", "--log", "--log-format", "--criu", "--rootless",
                                       "--cgroup-manager", "--log-level", "-root", "-log", "-log-format"};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
        if (strcmp(arg, opts[i]) == 0)
            return 1;
    return 0;
}

int xf_split_command(int nargs, char *const *args, const char **command)
{
    int i = 0;

    *command = NULL;
    while (i < nargs) {
        const char *arg = args[i];
        if (strcmp(arg, "--") == 0) {
            if (i + 1 >= nargs)
                return -1;
            *command = args[i + 1];
            return i + 1;
        }
        if (arg[0] != '-') {
            *command = arg;
            return i;
        }
        i += takes_value(arg) ? 2 : 1;
    }
    return -1;
}

int xf_global_flag(int nargs, char *const *args, const char *const *names, size_t nnames)
{
    int i = 0;

    while (i < nargs && args[i][0] == '-' && strcmp(args[i], "--") != 0) {
        for (size_t k = 0; k < nnames; k++)
            if (strcmp(args[i], names[k]) == 0)
                return 1;
        i += takes_value(args[i]) ? 2 : 1;
    }
    return 0;
}

const char *xf_option_value(int nargs, char *const *args, int start, const char *const *names, size_t nnames)
{
    for (int i = start < 0 ? 0 : start; i < nargs; i++) {
        const char *arg = args[i];
        if (strcmp(arg, "--") == 0)
            return NULL;
        for (size_t k = 0; k < nnames; k++) {
            size_t n = strlen(names[k]);
            if (strcmp(arg, names[k]) == 0 && i + 1 < nargs)
                return args[i + 1];
            if (strncmp(arg, names[k], n) == 0 && arg[n] == '=')
                return arg + n + 1;
        }
    }
    return NULL;
}

