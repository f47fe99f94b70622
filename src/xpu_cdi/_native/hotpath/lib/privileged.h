/* Whether a container is privileged, for the env-selection setting
 * (node_config.h): its config.json's process.capabilities.bounding holds every
 * capability from CAP_CHOWN (0) to CAP_AUDIT_READ (37) -- what
 * `--privileged` gives in docker, podman and the CRI (containerd, CRI-O),
 * which grant every capability they know.  The later ones (CAP_PERFMON,
 * CAP_BPF, CAP_CHECKPOINT_RESTORE, Linux 5.8-5.9) are not required: runtimes
 * older than those kernels grant --privileged containers without them, and
 * a container holding all of 0..37 (CAP_SYS_ADMIN, CAP_SYS_MODULE,
 * CAP_SYS_RAWIO among them) can do anything on the node already. */
#ifndef XF_PRIVILEGED_H
#define XF_PRIVILEGED_H
#include "lib/json.h"

/* 1 privileged, 0 not (no process, no capabilities, a missing one, or a
 * malformed list: not privileged). */
int xf_privileged(const fj *config);

#endif
