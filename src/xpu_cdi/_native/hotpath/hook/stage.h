/* Where the hook runs, relative to the container it serves.
 *
 * A prestart or createRuntime hook runs in the runtime's namespaces and
 * the OCI state's pid is the container's init as the runtime's pid
 * namespace sees it: the hook joins that process's mount namespace.  A
 * createContainer hook already runs in the container's namespaces
 * (runc: forked by its init, before pivot_root; crun: the same, with pid
 * 0 in the state), and the state's pid is then a pid of the container's
 * own pid namespace -- 1, or any number when the pod shares a pid
 * namespace -- while /proc is still the host's: /proc/<pid> is some other
 * process.  So the pid is looked up only where it means something: when
 * /proc belongs to our own pid namespace. */
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
