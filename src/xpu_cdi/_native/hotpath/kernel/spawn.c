/* A program of the image run confined (spawn.h): in the container's
 * namespaces and root, no capabilities, a clean environment, a timeout. */
#define _GNU_SOURCE /* setns, O_PATH and the other Linux interfaces below */
#include "kernel/spawn.h"

#define XC_SPAWN_MAX_ARGS 128

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdlib.h>
#include <unistd.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int split_blob(const char *blob, size_t n, char **out)
{
    if (n + 1 > XC_SPAWN_MAX_ARGS)
        return -E2BIG;
    for (size_t i = 0; i < n; i++, blob += strlen(blob) + 1)
        out[i] = (char *)blob;
    out[n] = NULL;
    return 0;
}

static void child_fail(int errfd, int err)
{
    ssize_t unused = write(errfd, &err, sizeof(err));
    (void)unused;
    _exit(127);
}

/* No capability now, and none to be had by any exec after: no_new_privs
 * (set before: no setuid bit or file capability grants anything) and
 * securebits locked so that being uid 0 grants nothing either (NOROOT) and
 * no capability is kept across uid changes or raised into the ambient set.
 * That bars every way to a capability the bounding set would also bar, in
 * two calls rather than one prctl per capability.  Permitted and
 * inheritable emptied empty the ambient set too. */
static void drop_all_caps(int errfd)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];

    if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
              SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
              SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) != 0)
        child_fail(errfd, errno);
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) != 0)
        child_fail(errfd, errno);
}

/* The signals ignored now (SigIgn of /proc/self/status; all when it cannot
 * be read), read before the fork. */
static unsigned long long ignored_signals(void)
{
    char buf[4096], *p;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1); /* printed whole in one read (single_open) */

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return ~0ULL;
    buf[n] = '\0';
    p = strstr(buf, "\nSigIgn:");
    return p == NULL ? ~0ULL : strtoull(p + strlen("\nSigIgn:"), NULL, 16);
}

/* Ignored signals stay ignored across exec, and whatever started the hook
 * (a runtime, a shim, a shell) may have ignored some: a program started
 * with SIGPIPE ignored never dies of a closed pipe.  Give the program
 * default dispositions and an empty mask.  Handled signals are reset by
 * the exec itself (the hook handles none), so only the ignored ones need
 * a call. */
static void reset_signals(unsigned long long ignored)
{
    sigset_t none;

    for (int sig = 1; sig < NSIG && sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && (ignored & (1ULL << (sig - 1))))
            signal(sig, SIG_DFL); /* EINVAL for the few that cannot be set: fine */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Join nsfds: every type but user and pid, then pid (for our children),
 * then user last and become uid/gid 0 in it.  Returns 1 when a pid
 * namespace was joined (the caller must fork once more to be in it). */
static int join_namespaces(const int *nsfds, const int *nstypes, size_t nns, int errfd)
{
    static const int order[] = {0, CLONE_NEWPID, CLONE_NEWUSER};
    int joined_pid = 0;

    for (size_t o = 0; o < sizeof(order) / sizeof(order[0]); o++) {
        for (size_t i = 0; i < nns; i++) {
            int is_special = nstypes[i] == CLONE_NEWPID || nstypes[i] == CLONE_NEWUSER;
            if (order[o] == 0 ? is_special : nstypes[i] != order[o])
                continue;
            if (setns(nsfds[i], nstypes[i]) != 0)
                child_fail(errfd, errno);
            if (nstypes[i] == CLONE_NEWPID)
                joined_pid = 1;
            if (nstypes[i] == CLONE_NEWUSER) { /* the container's root, not an unmapped host uid */
                if (setgroups(0, NULL) != 0 && errno != EPERM)
                    child_fail(errfd, errno);
                if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
                    child_fail(errfd, errno);
            }
        }
    }
    return joined_pid;
}

/* fork; in the child: join the given namespaces (and fork again inside a
 * joined pid namespace, so that the program cannot see or signal host
 * processes), chroot, no_new_privs, drop every capability, close all other
 * fds, exec with exactly envp.  The child dies with the hook (pdeathsig)
 * and is killed after timeout_ms.  stdout+stderr of the program are
 * captured into out (truncated, NUL-terminated); *status gets its waitpid
 * status.  -errno of a failed step before exec is returned. */
int xc_spawn_confined(const char *root, const char *argv_blob, size_t argc,
                      const char *env_blob, size_t envc, const int *nsfds,
                      const int *nstypes, size_t nns, int timeout_ms,
                      char *out, size_t outlen, int *status)
{
    char *argv[XC_SPAWN_MAX_ARGS], *envp[XC_SPAWN_MAX_ARGS];
    int errpipe[2], outpipe[2], err = 0, rv;
    size_t used = 0;
    pid_t pid;
    ssize_t n;
    struct timespec t0, now;
    unsigned long long ignored;

    if (outlen)
        out[0] = '\0';
    *status = -1;
    if ((rv = split_blob(argv_blob, argc, argv)) != 0 || (rv = split_blob(env_blob, envc, envp)) != 0)
        return rv;
    if (argc == 0)
        return -EINVAL;
    ignored = ignored_signals();
    if (pipe2(errpipe, O_CLOEXEC) != 0)
        return -errno;
    if (pipe2(outpipe, O_CLOEXEC) != 0) {
        err = errno;
        close(errpipe[0]);
        close(errpipe[1]);
        return -err;
    }
    pid = fork();
    if (pid < 0) {
        err = errno;
        close(errpipe[0]); close(errpipe[1]); close(outpipe[0]); close(outpipe[1]);
        return -err;
    }
    if (pid == 0) {
        int devnull;

        close(errpipe[0]);
        close(outpipe[0]);
        reset_signals(ignored);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
            child_fail(errpipe[1], errno);
        if (join_namespaces(nsfds, nstypes, nns, errpipe[1])) {
            pid_t inner = fork();
            if (inner < 0)
                child_fail(errpipe[1], errno);
            if (inner > 0) { /* relay the program's status; hold no pipe end */
                int st = 0;
                close(errpipe[1]);
                close(outpipe[1]);
                while (waitpid(inner, &st, 0) < 0 && errno == EINTR)
                    ;
                _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
            }
            if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
                child_fail(errpipe[1], errno);
        }
        if (chroot(root) != 0 || chdir("/") != 0)
            child_fail(errpipe[1], errno);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
            child_fail(errpipe[1], errno);
        drop_all_caps(errpipe[1]);
        devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (dup2(devnull >= 0 ? devnull : outpipe[1], 0) < 0 || dup2(outpipe[1], 1) < 0 ||
            dup2(outpipe[1], 2) < 0)
            child_fail(errpipe[1], errno);
        /* everything else the hook had open (state pipe, O_PATH fds into the
         * rootfs, cgroup dirs) must not reach the image's binary */
        if (syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) != 0)
            for (int fd = 3; fd < 4096; fd++)
                if (fd != errpipe[1])
                    fcntl(fd, F_SETFD, FD_CLOEXEC);
        execve(argv[0], argv, envp);
        child_fail(errpipe[1], errno);
    }
    close(errpipe[1]);
    close(outpipe[1]);
    n = read(errpipe[0], &err, sizeof(err));
    close(errpipe[0]);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char drain[512];
        char *dst = used + 1 < outlen ? out + used : drain;
        size_t room = used + 1 < outlen ? outlen - 1 - used : sizeof(drain);
        struct pollfd pfd = {outpipe[0], POLLIN, 0};
        long left;
        ssize_t got;

        clock_gettime(CLOCK_MONOTONIC, &now);
        left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) {
            kill(pid, SIGKILL); /* its child in the pid namespace dies by pdeathsig */
            err = ETIMEDOUT;
            n = sizeof(err);
            break;
        }
        if (poll(&pfd, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfd.revents == 0)
            continue;
        got = read(outpipe[0], dst, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (dst != drain)
            used += (size_t)got;
    }
    if (outlen)
        out[used] = '\0';
    close(outpipe[0]);
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (n == (ssize_t)sizeof(err) && err != 0)
        return -err;
    return 0;
}
