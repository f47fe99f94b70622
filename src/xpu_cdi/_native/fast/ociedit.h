/* xpu-container-runtime's compiled front end: the C twin of
 * xpu_cdi.runtime.wrapper (argument handling, the runtime lookup,
 * prepare), xpu_cdi.runtime.bundle (reading config.json, the cheap
 * may_request test) and xpu_cdi.runtime.ociedit (apply), plus the
 * non-durable atomic.write_atomic the wrapper uses for config.json.
 *
 * Anything it refuses is XF_ERR with one line in xf_reason saying what is
 * wrong and what to do; config.json is then left as it was. */
#ifndef XF_OCIEDIT_H
#define XF_OCIEDIT_H
#include "config.h"
#include "request.h"

#define XF_MAX_CONFIG_BYTES ((size_t)64 << 20) /* bundle.MAX_CONFIG_BYTES */

/* wrapper.split_command: the index of the runtime subcommand in args
 * (global options skipped) and its name in *command, or -1 and NULL. */
int xf_split_command(int nargs, char *const *args, const char **command);

/* wrapper.option_value: the value of the first of names (nnames of them)
 * at or after args[start] ("-b X", "--bundle=X"), or NULL; "--" ends it. */
const char *xf_option_value(int nargs, char *const *args, int start, const char *const *names, size_t nnames);

/* wrapper.spec_dirs from the value of XPU_CDI_SPEC_DIRS (or NULL). */
size_t xf_spec_dirs(const char *value, const char ***dirs);

/* wrapper.find_runtime: XPU_CDI_RUNTIME (a path, or a name on PATH), else
 * runc on PATH (default PATH when empty), skipping copies of this wrapper:
 * files whose real path is that of self or of self + ".py" (its Python
 * half).  *out is the path to exec.  XF_ERR (worded) when there is none or
 * the variable names the wrapper itself. */
int xf_find_runtime(const char *runtime_env, const char *path_env, const char *self, const char **out);

/* bundle.may_request on config.json's raw bytes: 0 only when they hold no
 * "cdi.k8s.io" and no `"NAME=` for a selection variable (an upper-case
 * identifier of the hook indexes' text in dirs, or a known one). */
int xf_may_request(const char *data, size_t len, const char *const *dirs, size_t ndirs);

/* ociedit.apply of merged edits (the nodes', mounts' and hooks' json
 * members are what is applied, as Python applies the spec's dicts) and
 * edits->gids as additionalGids.  The tree may be partly edited when this
 * returns XF_ERR: drop it then. */
int xf_apply(fj *config, const struct xf_edits *edits);

/* The edited config as jsondump.dumps writes it, up to JSON equality:
 * duplicate keys collapsed as json.loads does (first place, last value);
 * XF_ERR for a number Python would read as infinity (dumps refuses it). */
int xf_serialise(fj *config, struct xf_buf *out);

/* atomic.write_atomic(path, data, mode, durable=False): a temp file
 * ".<base>.<pid>.xpu-cdi-tmp" beside path with exactly mode, renamed over
 * path; the temp file is removed on failure (XF_ERR). */
int xf_write_atomic(const char *path, const char *data, size_t len, unsigned mode);

/* wrapper.prepare: apply the requested devices' edits to
 * <bundle>/config.json.  XF_OK with *edited 0 when nothing was asked for
 * (the file is left untouched), 1 when the file was rewritten.  *ignored
 * names the selection variable the node config (cfg) made this code
 * ignore, or is NULL. */
int xf_prepare(const char *bundle, const char *const *dirs, size_t ndirs, const struct xf_config *cfg, int *edited,
               const char **ignored);

#endif
