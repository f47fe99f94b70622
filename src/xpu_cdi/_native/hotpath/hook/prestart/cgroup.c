/* The container's device cgroup: found, opened, given the rules (cgroup.h). */
#include "hook/prestart/cgroup.h"
#include "kernel/bpf_dev.h"
#include "kernel/cgroup.h"
#include "lib/cgroup_locate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* /proc/self/mountinfo of a busy Kubernetes node is a few hundred KiB;
 * /proc/PID/cgroup is one line per hierarchy. */
#define MOUNTINFO_LIMIT (8u << 20)
#define CGROUPS_LIMIT (1u << 20)
#define MAX_PROGS 64 /* device programs attached to one cgroup */
#define VERIFIER_LOG (1u << 16)

/* A rule both forms can hold: c or b, numbers that fit the unsigned 32-bit
 * words of the BPF program's comparisons (and so a devices.allow line),
 * access a non-empty subset of "rwm". */
static int rule_ok(const struct xf_rule *r)
{
    size_t len = strnlen(r->access, sizeof(r->access));

    if ((r->type != 'c' && r->type != 'b') || r->major < 0 || r->major > UINT32_MAX ||
        r->minor < 0 || r->minor > UINT32_MAX || len == 0 || len == sizeof(r->access) ||
        strspn(r->access, "rwm") != len)
        return 0;
    return 1;
}

static int allow_v1(const struct xf_cgroup *cg, const struct xf_rule *rules, size_t n)
{
    const char **lines = xf_alloc((n ? n : 1) * sizeof(*lines));
    size_t failed;
    int rv;

    for (size_t i = 0; i < n; i++)
        lines[i] = xf_printf("%c %lld:%lld %s", rules[i].type, rules[i].major, rules[i].minor, rules[i].access);
    if ((rv = xc_devices_allow(cg->fd, lines, n, &failed)) != 0)
        return xf_say(XF_ERR, "cgroup v1: cannot allow '%s' in '%s': %s", lines[failed], cg->path, strerror(-rv));
    return XF_OK;
}

static int restore_step(const long *a)
{
    return xc_bpf_dev_restore((int)a[0], (int)a[1], (int)a[2], (unsigned int)a[3]);
}

/* The verifier's last line, for the reason ("" when it said nothing). */
static const char *last_line(char *log)
{
    size_t n = strlen(log);
    char *p;

    while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' '))
        log[--n] = '\0';
    p = strrchr(log, '\n');
    return p ? p + 1 : log;
}

/* Replace each device program by a copy that also allows the rules.  A
 * program replaced by someone else between the query and the patch gives
 * EAGAIN: with nothing done yet, query again (3 attempts in all). */
static int allow_v2(const struct xf_cgroup *cg, const struct xf_rule *rules, size_t n,
                    struct xf_undo *undo, int *replaced)
{
    unsigned int *words = xf_alloc((n ? n : 1) * XC_RULE_WORDS * sizeof(*words));
    char *log = xf_alloc(VERIFIER_LOG);

    for (size_t i = 0; i < n; i++) {
        unsigned int *w = words + i * XC_RULE_WORDS;
        w[0] = rules[i].type == 'c' ? 2 : 1;
        w[1] = (unsigned int)rules[i].major;
        w[2] = (unsigned int)rules[i].minor;
        w[3] = (strchr(rules[i].access, 'm') ? 1 : 0) | (strchr(rules[i].access, 'r') ? 2 : 0) |
               (strchr(rules[i].access, 'w') ? 4 : 0);
    }
    for (int attempt = 0;; attempt++) {
        unsigned int ids[MAX_PROGS], flags = 0;
        size_t count = 0;
        int done = 0, rv;
        const char *what;

        rv = xc_bpf_dev_query(cg->fd, ids, MAX_PROGS, &count, &flags);
        what = "BPF_PROG_QUERY";
        if (rv == 0) {
            if (count > MAX_PROGS)
                count = MAX_PROGS;
            for (size_t i = 0; i < count; i++) {
                int old_fd, new_fd;
                rv = xc_bpf_dev_patch(cg->fd, ids[i], flags, words, n, &old_fd, &new_fd, log, VERIFIER_LOG);
                if (rv != 0) {
                    const char *line = last_line(log);
                    what = xf_printf("device program %u%s%s%s", ids[i], *line ? " (verifier: " : "", line,
                                     *line ? ")" : "");
                    break;
                }
                xf_undo_keep_fd(undo, old_fd);
                xf_undo_keep_fd(undo, new_fd);
                xf_undo_push(undo, xf_printf("restore device program %u of '%s'", ids[i], cg->path), restore_step,
                             cg->fd, old_fd, new_fd, (long)flags);
                done++;
            }
            if (rv == 0) {
                *replaced = done;
                return XF_OK;
            }
        }
        if (rv == -EAGAIN && done == 0 && attempt < 2)
            continue;
        return xf_say(XF_ERR, "cgroup v2: cannot add the devices to '%s' (bpf %s: %s)", cg->path, what,
                      strerror(-rv));
    }
}

int xf_cgroup_allow(const struct xf_cgroup *cg, const struct xf_rule *rules, size_t n,
                    struct xf_undo *undo, int *replaced)
{
    *replaced = 0;
    for (size_t i = 0; i < n; i++)
        if (!rule_ok(&rules[i]))
            return xf_say(XF_ERR, "device rule %zu: unusual type, numbers or access", i);
    if (cg->version == 1)
        return allow_v1(cg, rules, n);
    if (cg->version == 2)
        return allow_v2(cg, rules, n, undo, replaced);
    return xf_say(XF_ERR, "cgroup version %d", cg->version);
}

int xf_cgroup_open(int pid, struct xf_cgroup *out)
{
    char *cgroups, *mountinfo;
    size_t clen, mlen;
    const char *procfile = xf_printf("/proc/%d/cgroup", pid), *path, *v2path, *devpath;
    int version, fd;

    out->fd = -1;
    if (xf_read_proc_one(procfile, CGROUPS_LIMIT, &cgroups, &clen) != XF_OK)
        return xf_wrap(XF_ERR, "cannot read the cgroups of container process %d", pid);
    if (memchr(cgroups, '\0', clen) == NULL) {
        xf_proc_cgroups(cgroups, &v2path, &devpath);
        if ((fd = xc_cgroup_usual(pid, v2path, devpath, &version, &path)) >= 0)
            goto found;
    }
    if (xf_read_file("/proc/self/mountinfo", MOUNTINFO_LIMIT, &mountinfo, &mlen, NULL) != XF_OK)
        return xf_wrap(XF_ERR, "cannot read the cgroups of container process %d", pid);
    if (xf_cgroup_locate(mountinfo, mlen, cgroups, clen, &version, &path) != XF_OK)
        return XF_ERR;
    if ((fd = xc_cgroup_open(path, version)) < 0)
        return xf_say(XF_ERR, "cgroup '%s' of container process %d: %s", path, pid, strerror(-fd));
found:
    out->version = version;
    out->path = path;
    out->fd = fd;
    return XF_OK;
}

void xf_cgroup_close(struct xf_cgroup *cg)
{
    if (cg->fd >= 0)
        close(cg->fd);
    cg->fd = -1;
}
