/* xpu-cdi-fast-test: the unit tests' way into the front end's C modules
 * (tests/native/).  Built with the front end, never installed: one
 * subcommand per module, each defined in that module's *_test.c. */
#include "common.h"
#include "test_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int xf_test_json(int argc, char **argv);
int xf_test_request(int argc, char **argv);
int xf_test_cgroup(int argc, char **argv);
int xf_test_ociedit(int argc, char **argv);

int xf_test_next_frame(char **data, size_t *len, size_t limit)
{
    char line[32];
    size_t n = 0;
    int c;

    while ((c = getchar()) != EOF && c != '\n') {
        if (c < '0' || c > '9' || n + 1 >= sizeof(line))
            return -1;
        line[n++] = (char)c;
    }
    if (c == EOF && n == 0)
        return 0;
    if (c == EOF || n == 0)
        return -1;
    line[n] = '\0';
    *len = strtoul(line, NULL, 10);
    if (*len > limit)
        return -1;
    *data = xf_alloc(*len + 1);
    if (*len > 0 && fread(*data, 1, *len, stdin) != *len)
        return -1;
    return 1;
}

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
