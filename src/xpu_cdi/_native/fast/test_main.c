/* xpu-cdi-fast-test: the unit tests' way into the front end's C modules
 * (tests/native/).  Built with the front end, never installed: one
 * subcommand per module, each defined in that module's *_test.c. */
#include "common.h"

#include <stdio.h>
#include <string.h>

int xf_test_json(int argc, char **argv);
int xf_test_request(int argc, char **argv);
int xf_test_cgroup(int argc, char **argv);
int xf_test_ociedit(int argc, char **argv);

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"json", xf_test_json},
    {"request", xf_test_request},
    {"cgroup", xf_test_cgroup},
    {"ociedit", xf_test_ociedit},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "usage: xpu-cdi-fast-test json|request|cgroup|ociedit ARGS...\n");
    return 2;
}
