/* CDI name rules and cdi.k8s.io/ annotations (cdi_names.c), internal to
 * the CDI modules (request.h is the public API): what selection.c needs. */
#ifndef XF_CDI_NAMES_H
#define XF_CDI_NAMES_H
#include "lib/collections.h"
#include "lib/files.h"
#include "lib/strings.h"

/* The devices of the cdi.k8s.io/ members of state's then config's
 * annotations (objects or NULL; config's win on a repeated key), in key
 * order, added to out.  XF_ERR for a key or value that breaks the CDI
 * annotation rules (cdi.k8s.io/<name of at most 63 ASCII characters>, a
 * comma list of qualified device names) or is not a string. */
int xf_annotation_names(const fj *ann_state, const fj *ann_config, struct xf_nameset *out);

#endif
