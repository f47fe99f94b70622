/* The create-symlinks spec hook: its --link arguments parsed, and the
 * links created inside the container's rootfs. */
#ifndef XF_CREATE_SYMLINKS_H
#define XF_CREATE_SYMLINKS_H
#include "hook/prestart/rootfs.h"

struct xf_link {
    const char *target, *link;
};

/* One "TARGET::LINK" spec parsed: XF_OK with *out filled (target
 * copied, link pointing into spec), or XF_ERR. */
int xf_link_parse(const char *spec, struct xf_link *out);

/* Each link made, relative to its resolved parent; an existing
 * link with the same target is fine.  *made counts those created.  XF_OK
 * or XF_ERR (what was made is journalled in x->undo). */
int xf_links_create(struct xf_root *x, const struct xf_link *links, size_t nlinks, size_t *made);

#endif
