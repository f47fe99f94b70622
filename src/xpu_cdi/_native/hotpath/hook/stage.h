/* Where the hook runs, relative to the container it serves (the stages and
 * why: docs/hook.md, "The spec's hooks").  The state's pid means something
 * only when /proc is our own pid namespace's: a createContainer hook runs
 * in the container's pid namespace while /proc is still the host's. */
#ifndef XF_STAGE_H
#define XF_STAGE_H

enum xf_stage {
    XF_STAGE_JOIN,     /* the state's pid is a process we see, in another mount namespace: join it */
    XF_STAGE_SAME_MNT, /* the state's pid is a process we see, in our mount namespace (a container
                        * without a pid namespace of its own, at createContainer) */
    XF_STAGE_INSIDE,   /* in the container's namespaces, its pid meaningless here: use nothing of it */
};

/* The stage for the OCI state's pid; XF_OK with *stage, or XF_ERR (reason
 * set: /proc unreadable). */
int xf_stage_of(int pid, enum xf_stage *stage);

#endif
