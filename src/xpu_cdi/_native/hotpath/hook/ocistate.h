/* What the hook reads about the container being created: the OCI state on
 * stdin and the bundle's config.json (the container's rootfs, its
 * process.env, annotations, capabilities), each read with a size limit and
 * parsed as data only.  Every refusal is one line for the user (xf_reason)
 * naming the input and what is wrong with it. */
#ifndef XF_OCISTATE_H
#define XF_OCISTATE_H
#include "lib/json.h"

#define XF_MAX_STATE_BYTES (1u << 20)   /* runc's state is ~300 bytes plus annotations */
/* real config.json files are 5-50 KB (a pod with hundreds of service env
 * vars stays under 1 MiB); the parsed tree costs up to ~50 bytes per input
 * byte for hostile input ([0,0,...]) */
#define XF_MAX_CONFIG_BYTES (4u << 20)

struct xf_oci {
    const char *id, *bundle;
    int pid;                  /* 0 when absent */
    const char *rootfs;       /* normalised absolute path */
    const fj *config;         /* the whole config.json */
    const char *config_text;  /* and its bytes (config_len of them), for xf_may_request */
    size_t config_len;
    const fj *env;            /* process.env (an array) or NULL */
    const fj *ann_state, *ann_config; /* annotations objects or NULL */
};

/* The state from fd (stdin), up to XF_MAX_STATE_BYTES + 1 bytes (kept in
 * *text even on failure).  XF_OK, or XF_ERR with the one-line reason. */
int xf_oci_read_state(int fd, char **text, size_t *len);

/* Parse the state text and read <bundle>/config.json.  XF_OK, or XF_ERR
 * with the one-line reason. */
int xf_oci_load(const char *text, size_t len, struct xf_oci *out);

#endif
