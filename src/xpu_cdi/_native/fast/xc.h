/* The kernel-facing functions of ../hook.c (shared with the Python hook
 * through the cffi extension), for the front end.  Contract as documented
 * in ../hook.cdef: 0 or -errno, fds O_CLOEXEC. */
#ifndef XF_XC_H
#define XF_XC_H
#include <stddef.h>

#define XC_RESOLVE_NO_OPENAT2 1
#define XC_RESOLVE_NOFOLLOW 2
#define XC_RULE_WORDS 4

int xc_setns(const char *nspath, int nstype);
int xc_resolve_in_root(int rootfd, const char *path, int flags, int *fd_out);
/* The walk behind xc_resolve_in_root (flags: XC_RESOLVE_NOFOLLOW), with an
 * optional create(ctx, parent dirfd, name, is_last) -> 0 or -errno for a
 * missing component, which is then opened again (not in hook.cdef: only
 * the front end uses it). */
int xc_walk_in_root(int rootfd, const char *path, int flags,
                    int (*create)(void *ctx, int dirfd, const char *name, int last), void *ctx,
                    int *fd_out);
int xc_setfsids(unsigned int uid, unsigned int gid);
int xc_mount(const char *source, const char *target, const char *fstype,
             unsigned long flags, const char *data);
int xc_umount(const char *target, int flags);
int xc_spawn_confined(const char *root, const char *argv, size_t argc,
                      const char *envp, size_t envc, const int *nsfds,
                      const int *nstypes, size_t nns, int timeout_ms,
                      char *out, size_t outlen, int *status);
int xc_bpf_dev_query(int cgfd, unsigned int *ids, size_t max, size_t *count,
                     unsigned int *attach_flags);
int xc_bpf_dev_patch(int cgfd, unsigned int prog_id, unsigned int attach_flags,
                     const unsigned int *rules, size_t nrules,
                     int *old_fd, int *new_fd, char *log, size_t loglen);
int xc_bpf_dev_restore(int cgfd, int old_fd, int new_fd, unsigned int attach_flags);

#endif
