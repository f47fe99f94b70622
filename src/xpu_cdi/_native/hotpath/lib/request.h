/* Which devices a container asked for, and their merged CDI edits: the
 * public API of lib/'s CDI modules (selection.c, hook_index.c,
 * cdi_names.c; spec_dirs.c, registry.c).  What the Python tooling must
 * agree with is data (the hook index `generate` writes) or shared test
 * vectors (tests/data/vectors/): docs/architecture.md. */
#ifndef XF_REQUEST_H
#define XF_REQUEST_H
#include "lib/json.h"

/* Field presence bits of struct xf_node. */
#define XF_HAS_MAJOR 1u
#define XF_HAS_MINOR 2u
#define XF_HAS_MODE 4u
#define XF_HAS_UID 8u
#define XF_HAS_GID 16u

struct xf_node {             /* a CDI deviceNodes entry */
    const char *path;        /* container path (always set, absolute not yet checked) */
    const char *host_path;   /* hostPath, or NULL */
    char type;               /* 'c', 'b', 'u', 'p', or 0 when absent */
    long long major, minor, mode, uid, gid; /* valid per the XF_HAS_* bits in present */
    unsigned present;
    const char *permissions; /* or NULL */
    const fj *json;          /* the entry as in the spec */
};

struct xf_mount {            /* a CDI mounts entry */
    const char *host_path, *container_path;
    const char *type;        /* or NULL */
    const char **options;
    size_t noptions;
    const fj *json;
};

struct xf_hook {             /* a CDI hooks entry */
    const char *hook_name, *path;
    const char **args;       /* NULL-free list, nargs long */
    size_t nargs;
    const fj *json;          /* the whole entry (env, timeout...) */
};

/* Merged edits of the requested devices (xf_resolve): each
 * spec's shared containerEdits once, first, then every device's own;
 * nodes de-duplicated by path, mounts by containerPath, hooks by equality. */
struct xf_edits {
    const char **env;
    size_t nenv;
    struct xf_node *nodes;
    size_t nnodes;
    struct xf_mount *mounts;
    size_t nmounts;
    struct xf_hook *hooks;
    size_t nhooks;
    long long *gids;         /* additionalGids, de-duplicated (the wrapper applies them) */
    size_t ngids;
    const char *unsupported; /* "intelRdt" / "netDevices" when an edit needs one, else NULL */
};

/* The hook indexes (*.xpu-cdi) of the spec dirs, by kind, later dirs
 * winning.  An index that is broken only disables env selection for its
 * kind (annotations still select, and the spec is still read). */
struct xf_index {
    const char *kind;
    const fj *json;          /* the whole index */
};
struct xf_indexes {
    struct xf_index *items;
    size_t n;
};
int xf_load_indexes(const char *const *dirs, size_t ndirs, struct xf_indexes *out);
/* The hook indexes of dirs listed and read (not parsed) into lib/files.c's
 * run-long store: what xf_may_request and xf_load_indexes read later, done
 * while the runtime is still writing the OCI state (main.c). */
void xf_prefetch_indexes(const char *const *dirs, size_t ndirs);

/* The qualified devices a container asked for, in this order: per kind
 * (sorted), the first of its selection variables present in env decides;
 * then cdi.k8s.io/ annotations by key.  env is the process.env array (or
 * NULL); ann_state and ann_config the annotations objects of the OCI state
 * and config.json (or NULL; config's win on a repeated key).  *n may be 0:
 * nothing asked for.  XF_ERR (worded) for a malformed value: a bad token,
 * range, annotation or process.env. */
int xf_requested(const struct xf_indexes *ix, const fj *env, const fj *ann_state, const fj *ann_config,
                 const char ***names, size_t *n);

/* The first selection variable of the indexes that env (process.env, or
 * NULL) sets, or NULL: what the env-selection setting (node_config.h) names
 * when it ignores a container's env. */
const char *xf_selection_var(const struct xf_indexes *ix, const fj *env);

/* The spec dirs, lowest priority first: the given ones (the hook's
 * --spec-dir), else XPU_CDI_SPEC_DIRS's value env split on ':' (empty
 * entries skipped), else /etc/cdi and /var/run/cdi.  More than
 * XF_MAX_SPEC_DIRS is XF_ERR, not a cut: a later dir wins, and dropping
 * the rest could answer "nothing asked". */
#define XF_MAX_SPEC_DIRS 64
int xf_spec_dirs(const char *const *given, size_t ngiven, const char *env, const char ***dirs, size_t *n);

/* Look the qualified names up in the spec dirs (lowest priority first)
 * and merge their edits.  Files that are broken or define a device twice
 * in one dir are skipped, one line each in xf_spec_problems (to be
 * warned about); XF_ERR when a name is defined by no spec (xf_reason
 * names the dirs, the known devices and the skipped files) or an edit
 * cannot be applied. */
extern const char **xf_spec_problems;
extern size_t xf_nspec_problems;
int xf_resolve(const char *const *dirs, size_t ndirs, const char *const *names, size_t n,
               struct xf_edits *out);

#endif
