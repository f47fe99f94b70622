/* Placing device nodes and bind mounts in the rootfs (place.c). */
#ifndef XF_PLACE_H
#define XF_PLACE_H
#include "hook/prestart/plan.h"
#include "hook/prestart/rootfs.h"

#include <sys/stat.h>

/* O_PATH fd of a mount source, its owner and mode checked, and its fstat (see place.c).
 * Its reasons, and make_node's for a node already there, name what failed
 * (xf_reason_named). */
int open_source(const char *host, const struct xf_plan_node *node, int *fd_out, struct stat *st_out);
/* Bind src (fstat srcst) at container path cpath (leaf 'd' dir or 'f' file), flags applied on a remount;
 * src is the journal's from then on (closed with it). */
int bind_at(struct xf_root *x, int src, const struct stat *srcst, const char *cpath, char leaf,
            unsigned long flags, int recursive, int *made);
/* Create (or bind, for bind) device node n; *how says which. */
int make_node(struct xf_root *x, const struct xf_plan_node *n, int bind, const char **how);

#endif
