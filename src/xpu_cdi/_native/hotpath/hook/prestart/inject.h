/* Inject merged CDI edits into a container being created, from a prestart
 * / createRuntime hook (plan first, then the steps of inject.c).  All or
 * nothing: every change is journalled and undone when a later step fails. */
#ifndef XF_INJECT_H
#define XF_INJECT_H
#include "hook/stage.h"
#include "lib/request.h"

struct xf_container {
    const char *id;
    int pid;                 /* the container's init, a host pid (> 1), unless in place */
    const char *rootfs;      /* absolute path of the rootfs (as the runtime's mount namespace sees it) */
    enum xf_stage stage;     /* XF_STAGE_INSIDE: already in the container's namespaces (createContainer):
                              * nothing is joined and pid is not used; only spec hooks' work (links,
                              * ld cache) can be done there.  XF_STAGE_SAME_MNT: no mount namespace
                              * to join.  XF_STAGE_JOIN: join the mount namespace of pid. */
    int tools_note;          /* *note says only what the tools did (the tool subcommands' log line) */
    int exits;               /* the process exits after: no way back to its own mount namespace is kept,
                              * and on success the fds are left to the exit (docs/hook.md) */
};

/* Returns XF_OK with a one-line summary for the log in *note (the same
 * "injected ..." line's facts; a spec hook other than our update-ldcache /
 * create-symlinks is only noted there); XF_ERR, before anything is
 * touched, when the edits hold something the hook does not do (a fifo
 * node, a non-bind mount or an unsupported option, a malformed tool hook
 * argument...), or when a step failed and everything was undone (the
 * reason names the step); XF_FAIL when a step failed and could not be
 * undone (xf_reason says what is left).  Returns in the hook's own mount
 * namespace and cwd in every case. */
int xf_inject(const struct xf_container *c, const struct xf_edits *edits, const char **note);

#endif
