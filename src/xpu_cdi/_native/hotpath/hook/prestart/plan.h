/* The plan: the merged edits checked and completed on the host side,
 * nothing touched yet (node numbers from hostPath, mount flags, our spec
 * hooks' arguments parsed).  Anything the hook does not do is XF_ERR
 * here, worded. */
#ifndef XF_PLAN_H
#define XF_PLAN_H
#include "hook/prestart/cgroup.h"
#include "hook/create_symlinks.h"
#include "lib/request.h"

#include <sys/types.h>

struct xf_plan_node {
    const char *path, *host;
    char kind;                 /* 'c', 'u' or 'b' */
    unsigned major, minor;
    mode_t mode;               /* permission bits: fileMode, else the host node's, else 0666 */
    int chown;                 /* uid or gid is not 0 */
    long long uid, gid;        /* the spec's, else the host node's, else 0 */
};

struct xf_plan_mount {
    const char *host, *target;
    unsigned long flags;
    int recursive;
};

struct xf_plan {
    struct xf_plan_node *nodes;
    size_t nnodes;
    struct xf_plan_mount *mounts;
    size_t nmounts;
    const char **folders;      /* de-duplicated, in order */
    size_t nfolders;
    struct xf_link *links;
    size_t nlinks, caplinks;
    const char **notes;        /* hook notes, then the env note */
    size_t nnotes;
    struct xf_rule *rules;
    size_t nrules;
};

/* The plan of edits e (nothing touched): XF_OK with *p filled, or XF_ERR (reason set). */
int xf_plan_make(const struct xf_edits *e, struct xf_plan *p);

#endif
