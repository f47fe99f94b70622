/* The hook's half of the C layer: what `xpu-cdi-hook prestart` needs from
 * the kernel and Python 3.11's os module does not give: setns, openat2 /
 * an in-root path walk, mount(2), a confined fork+exec, and cgroup v2
 * device eBPF programs.  Compiled in the same extension as resolver.c
 * (build.py appends it with a #line marker), and on its own into the
 * compiled front end (fast/), which declares it in fast/xc.h.  Same contract: 0 or -errno,
 * no memory the caller must free; fds handed out are O_CLOEXEC. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* compiled on its own into the front end (fast/build.py) */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define XC_RESOLVE_NO_OPENAT2 1 /* force the manual walk (tests compare both) */
#define XC_RESOLVE_NOFOLLOW 2   /* do not follow a symlink in the last component */
#define XC_MAX_LINKS 40         /* as the kernel's MAXSYMLINKS */
#define XC_SPAWN_MAX_ARGS 128

int xc_setns(const char *nspath, int nstype)
{
    int fd = open(nspath, O_RDONLY | O_CLOEXEC);
    int rv;

    if (fd < 0)
        return -errno;
    rv = setns(fd, nstype) == 0 ? 0 : -errno;
    close(fd);
    return rv;
}

static int same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Resolve path component by component below rootfd without ever leaving
 * it: an absolute symlink restarts at rootfd, ".." at rootfd stays there,
 * more than XC_MAX_LINKS links is ELOOP.  Every step is an
 * openat(O_PATH|O_NOFOLLOW) relative to the previous fd, so nothing
 * outside the root is ever looked up by name.  flags: XC_RESOLVE_NOFOLLOW
 * returns a symlink in the last component itself.  With create, a
 * component that does not exist (also behind a symlink) is made by
 * create(ctx, dirfd of its resolved parent, name, is_last) -- 0 or
 * -errno, which the walk returns -- and then opened again, so the walk
 * goes on through what was made.  The one walk behind both the hook's
 * resolve (xc_resolve_in_root) and the front end's Root.ensure, the twin
 * of _inroot.walk. */
int xc_walk_in_root(int rootfd, const char *path, int flags,
                    int (*create)(void *ctx, int dirfd, const char *name, int last), void *ctx,
                    int *fd_out)
{
    char buf[2 * PATH_MAX], tmp[2 * PATH_MAX], target[PATH_MAX], name[NAME_MAX + 1];
    struct stat rootst, st;
    int cur, nfd, err, links = 0;
    char *p;

    *fd_out = -1;
    if (strlen(path) >= sizeof(buf))
        return -ENAMETOOLONG;
    if (fstat(rootfd, &rootst) != 0)
        return -errno;
    cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    strcpy(buf, path);
    p = buf;
    for (;;) {
        size_t len;
        int last;
        ssize_t n;

        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        len = strcspn(p, "/");
        if (len > NAME_MAX) {
            err = ENAMETOOLONG;
            goto fail;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        last = p[strspn(p, "/")] == '\0';
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            if (fstat(cur, &st) != 0)
                goto fail_errno;
            if (same_inode(&st, &rootst))
                continue; /* ".." never climbs above the root */
            nfd = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (nfd < 0)
                goto fail_errno;
            close(cur);
            cur = nfd;
            continue;
        }
        nfd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            int rv = create(ctx, cur, name, last); /* relative to the resolved parent */
            if (rv != 0) {
                err = -rv;
                goto fail;
            }
            nfd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0)
            goto fail_errno;
        if (fstat(nfd, &st) != 0) {
            err = errno;
            close(nfd);
            goto fail;
        }
        if (S_ISLNK(st.st_mode) && !(last && (flags & XC_RESOLVE_NOFOLLOW))) {
            if (++links > XC_MAX_LINKS) {
                close(nfd);
                err = ELOOP;
                goto fail;
            }
            n = readlinkat(nfd, "", target, sizeof(target) - 1);
            err = errno;
            close(nfd);
            if (n < 0)
                goto fail;
            if ((size_t)n >= sizeof(target) - 1) {
                err = ENAMETOOLONG;
                goto fail;
            }
            target[n] = '\0';
            if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%s", target, p) >= sizeof(tmp)) {
                err = ENAMETOOLONG;
                goto fail;
            }
            strcpy(buf, tmp);
            p = buf;
            if (target[0] == '/') { /* absolute: restart at the root, not the host's / */
                nfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
                if (nfd < 0)
                    goto fail_errno;
                close(cur);
                cur = nfd;
            }
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode)) {
            close(nfd);
            err = ENOTDIR;
            goto fail;
        }
        close(cur);
        cur = nfd;
    }
    *fd_out = cur;
    return 0;
fail_errno:
    err = errno;
fail:
    close(cur);
    return -err;
}

int xc_resolve_in_root(int rootfd, const char *path, int flags, int *fd_out)
{
    *fd_out = -1;
    if (path[0] == '\0')
        path = "."; /* the root itself, as the walk answers */
    if (!(flags & XC_RESOLVE_NO_OPENAT2)) {
        struct open_how how;
        int tries;

        memset(&how, 0, sizeof(how));
        how.flags = O_PATH | O_CLOEXEC | ((flags & XC_RESOLVE_NOFOLLOW) ? O_NOFOLLOW : 0);
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        for (tries = 0; tries < 4; tries++) {
            int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
            if (fd >= 0) {
                *fd_out = fd;
                return 0;
            }
            if (errno != EAGAIN)
                break;
        }
        /* ENOSYS (kernel < 5.6), EPERM (a seccomp filter), E2BIG, or EAGAIN
         * under constant renames: the walk gives the same answer, slower. */
        if (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EAGAIN)
            return -errno;
    }
    return xc_walk_in_root(rootfd, path, flags & XC_RESOLVE_NOFOLLOW, NULL, NULL, fd_out);
}

/* Set the filesystem uid/gid (creations in a user namespace's filesystems
 * must be owned by ids mapped there, else EOVERFLOW).  setfsuid reports no
 * error, so read the value back: -EPERM when it did not take. */
int xc_setfsids(unsigned int uid, unsigned int gid)
{
    setfsgid(gid);
    setfsuid(uid);
    if ((unsigned int)setfsgid(-1) != gid || (unsigned int)setfsuid(-1) != uid)
        return -EPERM;
    return 0;
}

int xc_mount(const char *source, const char *target, const char *fstype,
             unsigned long flags, const char *data)
{
    return mount(source, target, fstype, flags, data) == 0 ? 0 : -errno;
}

int xc_umount(const char *target, int flags)
{
    return umount2(target, flags) == 0 ? 0 : -errno;
}

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

static void drop_all_caps(int errfd)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];

    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            child_fail(errfd, errno);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); /* EINVAL before 4.3: none to clear */
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) != 0)
        child_fail(errfd, errno);
}

/* Ignored signals stay ignored across exec: Python ignores SIGPIPE and
 * SIGXFSZ, and a program started with SIGPIPE ignored never dies of a
 * closed pipe.  Give the program default dispositions and an empty mask. */
static void reset_signals(void)
{
    sigset_t none;

    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
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

    if (outlen)
        out[0] = '\0';
    *status = -1;
    if ((rv = split_blob(argv_blob, argc, argv)) != 0 || (rv = split_blob(env_blob, envc, envp)) != 0)
        return rv;
    if (argc == 0)
        return -EINVAL;
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
        reset_signals();
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

/* ---------------------------------------------------------------------- *
 * cgroup v2 device access.  The kernel asks every BPF_CGROUP_DEVICE     *
 * program attached to the cgroup; runc attaches one (BPF_F_ALLOW_MULTI)  *
 * compiled from linux.resources.devices.  To add devices we load a copy  *
 * of each attached program with a prefix that returns "allow" for our    *
 * devices and otherwise falls through into the original instructions     *
 * (fetched as the kernel holds them, "xlated"), then swap it in with     *
 * BPF_F_REPLACE, so no moment exists with no program attached.          *
 * ---------------------------------------------------------------------- */
#define XC_BPF_MAX_INSNS 65536
#define XC_RULE_WORDS 4 /* type (2 char, 1 block, 0 any), major, minor, access (1 m, 2 r, 4 w) */
#define XC_ANY 0xffffffffu

static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    struct bpf_insn i;

    memset(&i, 0, sizeof(i));
    i.code = code;
    i.dst_reg = dst;
    i.src_reg = src;
    i.off = off;
    i.imm = imm;
    return i;
}

int xc_bpf_dev_query(int cgfd, unsigned int *ids, size_t max, size_t *count, unsigned int *attach_flags)
{
    union bpf_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.query.target_fd = (uint32_t)cgfd;
    attr.query.attach_type = BPF_CGROUP_DEVICE;
    attr.query.prog_ids = (uint64_t)(uintptr_t)ids;
    attr.query.prog_cnt = (uint32_t)max;
    if (sys_bpf(BPF_PROG_QUERY, &attr) != 0)
        return -errno;
    *count = attr.query.prog_cnt;
    *attach_flags = attr.query.attach_flags;
    return 0;
}

/* Number of prefix instructions for nrules rules (for the buffer size). */
static size_t rule_len(const unsigned int *r)
{
    return (size_t)(r[0] != 0) + (r[1] != XC_ANY) + (r[2] != XC_ANY) + ((r[3] & 7) != 7 ? 4 : 0) + 2;
}

static size_t prefix_len(const unsigned int *rules, size_t nrules)
{
    size_t n = 4;
    for (size_t i = 0; i < nrules; i++)
        n += rule_len(rules + i * XC_RULE_WORDS);
    return n;
}

static size_t emit_prefix(struct bpf_insn *out, const unsigned int *rules, size_t nrules)
{
    size_t n = 0;

    /* r2 = type, r3 = major, r4 = minor, r5 = access; r1 (ctx) is left for
     * the original program, which initialises any register it reads. */
    out[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
    out[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
    out[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 4, 0);
    out[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 8, 0);
    for (size_t i = 0; i < nrules; i++) {
        const unsigned int *r = rules + i * XC_RULE_WORDS;
        size_t start = n, body = rule_len(r);
        /* each check jumps over the rest of this rule's body when it fails */
#define SKIP() ((int16_t)(start + body - (n + 1)))
        if (r[0] != 0)
            out[n] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 0, (int32_t)r[0]), out[n].off = SKIP(), n++;
        if (r[1] != XC_ANY)
            out[n] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 0, (int32_t)r[1]), out[n].off = SKIP(), n++;
        if (r[2] != XC_ANY)
            out[n] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 0, (int32_t)r[2]), out[n].off = SKIP(), n++;
        if ((r[3] & 7) != 7) { /* some of m/r/w not allowed: any of them asked -> next rule */
            out[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 0, 0);
            out[n++] = insn(BPF_ALU | BPF_RSH | BPF_K, BPF_REG_5, 0, 0, 16);
            out[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_5, 0, 0, (int32_t)(~r[3] & 7));
            out[n] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 0, 0), out[n].off = SKIP(), n++;
        }
#undef SKIP
        out[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
        out[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    }
    return n;
}


/* BPF_OBJ_GET_INFO_BY_FD into *info (the caller presets any fields it wants
 * filled, such as the instruction buffer).  0, or -1 with errno set. */
static int prog_info(int fd, struct bpf_prog_info *info)
{
    union bpf_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.info.bpf_fd = (uint32_t)fd;
    attr.info.info_len = sizeof(*info);
    attr.info.info = (uint64_t)(uintptr_t)info;
    return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) == 0 ? 0 : -1;
}

/* Attach prog_fd to the cgroup in place of replaced_fd.  With ALLOW_MULTI
 * (runc's mode) only BPF_F_REPLACE swaps exactly that program; a cgroup in
 * single-program mode replaces whatever is attached.  Returns 0 or -1 with
 * errno set, like the syscall. */
static int attach_replacing(int cgfd, int prog_fd, int replaced_fd, unsigned int attach_flags)
{
    union bpf_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.target_fd = (uint32_t)cgfd;
    attr.attach_bpf_fd = (uint32_t)prog_fd;
    attr.attach_type = BPF_CGROUP_DEVICE;
    if (attach_flags & BPF_F_ALLOW_MULTI) {
        attr.attach_flags = BPF_F_ALLOW_MULTI | BPF_F_REPLACE;
        attr.replace_bpf_fd = (uint32_t)replaced_fd;
    } else {
        attr.attach_flags = attach_flags;
    }
    return sys_bpf(BPF_PROG_ATTACH, &attr) == 0 ? 0 : -1;
}

/* Replace attached program prog_id with a copy that also allows rules.
 * On success *old_fd (the original, kept so it can be restored) and
 * *new_fd are open; the caller closes them.  log gets the verifier's
 * message when the kernel refuses the program. */
int xc_bpf_dev_patch(int cgfd, unsigned int prog_id, unsigned int attach_flags,
                     const unsigned int *rules, size_t nrules,
                     int *old_fd, int *new_fd, char *log, size_t loglen)
{
    union bpf_attr attr;
    struct bpf_prog_info info;
    struct bpf_insn *insns = NULL;
    size_t pre, old_cnt;
    int ofd = -1, nfd = -1, err = 0;

    *old_fd = *new_fd = -1;
    if (loglen)
        log[0] = '\0';
    memset(&attr, 0, sizeof(attr));
    attr.prog_id = prog_id;
    ofd = (int)sys_bpf(BPF_PROG_GET_FD_BY_ID, &attr);
    if (ofd < 0)
        return -errno;

    memset(&info, 0, sizeof(info));
    if (prog_info(ofd, &info) != 0) {
        err = errno;
        goto out;
    }
    if (info.type != BPF_PROG_TYPE_CGROUP_DEVICE) {
        err = EINVAL;
        goto out;
    }
    old_cnt = info.xlated_prog_len / sizeof(struct bpf_insn);
    if (old_cnt == 0) { /* the kernel hides the instructions from us */
        err = EPERM;
        goto out;
    }
    pre = prefix_len(rules, nrules);
    if (old_cnt + pre > XC_BPF_MAX_INSNS) {
        err = E2BIG;
        goto out;
    }
    /* the only allocation: freed below, never seen by Python */
    insns = calloc(old_cnt + pre, sizeof(struct bpf_insn));
    if (insns == NULL) {
        err = ENOMEM;
        goto out;
    }
    if (emit_prefix(insns, rules, nrules) != pre) {
        err = EFAULT;
        goto out;
    }
    {
        uint32_t want = info.xlated_prog_len;
        memset(&info, 0, sizeof(info));
        info.xlated_prog_len = want;
        info.xlated_prog_insns = (uint64_t)(uintptr_t)(insns + pre);
        if (prog_info(ofd, &info) != 0) {
            err = errno;
            goto out;
        }
        if (info.xlated_prog_len != want) { /* replaced under us: retry from the query */
            err = EAGAIN;
            goto out;
        }
    }

    memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.expected_attach_type = BPF_CGROUP_DEVICE;
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.insn_cnt = (uint32_t)(old_cnt + pre);
    attr.license = (uint64_t)(uintptr_t)"Apache-2.0";
    if (loglen > 1) {
        attr.log_level = 1;
        attr.log_buf = (uint64_t)(uintptr_t)log;
        attr.log_size = (uint32_t)(loglen > UINT32_MAX ? UINT32_MAX : loglen);
    }
    memcpy(attr.prog_name, "xpu_cdi_dev", sizeof("xpu_cdi_dev"));
    nfd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (nfd < 0 && loglen > 1 && errno == ENOSPC) { /* log too small: load without it */
        attr.log_level = 0;
        attr.log_buf = 0;
        attr.log_size = 0;
        nfd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    }
    if (nfd < 0) {
        err = errno;
        goto out;
    }
    if (fcntl(nfd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(ofd, F_SETFD, FD_CLOEXEC) != 0) {
        err = errno;
        goto out;
    }

    if (attach_replacing(cgfd, nfd, ofd, attach_flags) != 0) {
        err = errno;
        goto out;
    }
out:
    free(insns);
    if (err != 0) {
        if (nfd >= 0)
            close(nfd);
        close(ofd);
        return -err;
    }
    *old_fd = ofd;
    *new_fd = nfd;
    return 0;
}

/* Put the original program back in place of ours (undo of a failed hook). */
int xc_bpf_dev_restore(int cgfd, int old_fd, int new_fd, unsigned int attach_flags)
{
    return attach_replacing(cgfd, old_fd, new_fd, attach_flags) == 0 ? 0 : -errno;
}
