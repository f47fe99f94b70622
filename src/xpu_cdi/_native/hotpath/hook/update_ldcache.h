/* The update-ldcache spec hook: our ld.so.conf.d entry written through
 * the rootfs fd (never through a path the image could redirect), and the
 * image's own ldconfig, if it has one, run confined (kernel/spawn.h). */
#ifndef XF_UPDATE_LDCACHE_H
#define XF_UPDATE_LDCACHE_H
#include "hook/prestart/container.h"
#include "hook/prestart/rootfs.h"

/* xc_spawn_confined takes argc + 1 <= 128: ldconfig and its folders */
#define XF_LDCACHE_MAX_ARGC 127
#define XF_LDCACHE_MAX_FOLDERS (XF_LDCACHE_MAX_ARGC - 1)

/* The image's ld cache updated for folders (absolute, de-duplicated, at most
 * XF_LDCACHE_MAX_FOLDERS), ldconfig joining the namespaces of container
 * process pid that differ from ours (ns NULL: none, the hook runs inside).
 * XF_OK with *note for the log (also when there is no ldconfig or none of
 * the folders exist: then nothing is touched), or XF_ERR. */
int xf_ldcache_update(struct xf_root *x, const char *const *folders, size_t nfolders, const struct xf_nsdirs *ns,
                      int pid, const char **note);

#endif
