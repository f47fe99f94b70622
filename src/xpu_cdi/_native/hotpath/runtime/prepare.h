/* The wrapper's one job before it execs the runtime (prepare.c). */
#ifndef XF_PREPARE_H
#define XF_PREPARE_H
#include "lib/node_config.h"
#include "lib/request.h"

#define XF_MAX_CONFIG_BYTES ((size_t)64 << 20) /* a config.json larger is refused */

/* Apply the requested devices' edits to
 * <bundle>/config.json.  XF_OK with *edited 0 when nothing was asked for
 * (the file is left untouched), 1 when the file was rewritten.  *ignored
 * names the selection variable the node config (cfg) made this code
 * ignore, or is NULL. */
int xf_prepare(const char *bundle, const char *const *dirs, size_t ndirs, const struct xf_config *cfg, int *edited,
               const char **ignored);

#endif
