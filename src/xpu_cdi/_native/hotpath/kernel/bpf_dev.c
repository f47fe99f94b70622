/* cgroup v2 device programs (bpf_dev.h). */
#define _GNU_SOURCE /* setns, O_PATH and the other Linux interfaces below */
#include "kernel/bpf_dev.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

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
    /* the only allocation: freed below, never returned to the caller */
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
