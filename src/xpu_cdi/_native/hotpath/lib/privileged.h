/* Whether a container is privileged, for the env-selection setting
 * (node_config.h): its bounding set holds every capability from CAP_CHOWN
 * to CAP_AUDIT_READ (0-37), what --privileged gives everywhere
 * (docs/hook.md, "Options").  The later ones are not required: runtimes
 * older than their kernels grant --privileged without them. */
#ifndef XF_PRIVILEGED_H
#define XF_PRIVILEGED_H
#include "lib/json.h"

/* 1 privileged, 0 not (no process, no capabilities, a missing one, or a
 * malformed list: not privileged). */
int xf_privileged(const fj *config);

#endif
