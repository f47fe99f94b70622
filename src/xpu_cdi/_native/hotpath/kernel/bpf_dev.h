/* cgroup v2 device access (bpf_dev.c): the BPF_CGROUP_DEVICE programs of
 * a cgroup queried, patched with allow rules ahead of their own, swapped
 * in with BPF_F_REPLACE, and restored.  0 or -errno. */
#ifndef XF_BPF_DEV_H
#define XF_BPF_DEV_H
#include <stddef.h>

#define XC_RULE_WORDS 4 /* type (2 char, 1 block, 0 any), major, minor, access (1 m, 2 r, 4 w) */

int xc_bpf_dev_query(int cgfd, unsigned int *ids, size_t max, size_t *count,
                     unsigned int *attach_flags);
int xc_bpf_dev_patch(int cgfd, unsigned int prog_id, unsigned int attach_flags,
                     const unsigned int *rules, size_t nrules,
                     int *old_fd, int *new_fd, char *log, size_t loglen);
int xc_bpf_dev_restore(int cgfd, int old_fd, int new_fd, unsigned int attach_flags);

#endif
