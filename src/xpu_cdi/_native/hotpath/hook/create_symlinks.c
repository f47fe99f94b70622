/* create-symlinks in the container (create_symlinks.h). */
#include "hook/create_symlinks.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

/* One --link spec: TARGET and LINK not empty, LINK a plain absolute
 * path (xf_good_cpath). */
int xf_link_parse(const char *spec, struct xf_link *out)
{
    const char *sep = strstr(spec, "::");

    if (sep == NULL || sep == spec || !xf_good_cpath(sep + 2))
        return xf_say(XF_ERR, "create-symlinks: --link '%s' must be TARGET::LINK (LINK an absolute container path)",
                      spec);
    out->target = xf_strndup(spec, (size_t)(sep - spec));
    out->link = sep + 2;
    return XF_OK;
}

/* see create_symlinks.h */
int xf_links_create(struct xf_root *x, const struct xf_link *links, size_t nlinks, size_t *made)
{
    char current[PATH_MAX + 1];

    for (size_t i = 0; i < nlinks; i++) {
        const char *target = links[i].target, *link = links[i].link, *name;
        int parent, rv;

        if ((rv = xf_parent_of(x, link, &parent, &name)) != XF_OK)
            return rv;
        rv = xf_create_as_owner(x, XF_MK_LINK, parent, name, 0, 0, target);
        if (rv == -EEXIST) {
            ssize_t n = readlinkat(parent, name, current, sizeof(current));
            if (x->fsids_lost)
                return xf_say(XF_ERR, "cannot restore the filesystem ids");
            if (n < 0 || (size_t)n != strlen(target) || memcmp(current, target, (size_t)n) != 0)
                return xf_say(XF_ERR, "'%s' already exists in the container and is not a "
                              "link to '%s'", link, target);
            continue;
        }
        if (rv == 0) {
            rv = xf_journal_unlink(x, parent, name, 0, xf_printf("remove link '%s'", link));
            if (rv == 0 && x->fsids_lost)
                rv = -EPERM;
            if (rv == 0)
                (*made)++;
        }
        if (rv != 0)
            return xf_say(XF_ERR, "cannot create '%s': %s", link, strerror(-rv));
    }
    return XF_OK;
}
