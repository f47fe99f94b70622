/* make bench's timing wrapper around an OCI hook: runs PROG ARGS... (stdin,
 * the OCI state, passed on), then appends "<wall seconds> <cpu seconds>"
 * of that child alone to OUTFILE and exits with its status.  Registered in
 * config.json in place of the hook, so the figure is the hook's own time
 * inside a real `runc run`, free of runc's noise.
 *
 *     hooktime OUTFILE PROG [ARG...] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct timespec a, b;
    struct rusage ru;
    int status;
    pid_t pid;
    FILE *out;

    if (argc < 3) {
        fprintf(stderr, "usage: hooktime OUTFILE PROG [ARG...]\n");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid = fork();
    if (pid == 0) {
        execv(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) {
        perror("hooktime");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    out = fopen(argv[1], "a");
    if (out != NULL) {
        fprintf(out, "%.9f %.9f\n", seconds(&b) - seconds(&a),
                (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
        fclose(out);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
