/* CDI name rules and cdi.k8s.io/ annotations (cdi_names.c), internal to
 * the CDI modules (request.h is the public API): what selection.c needs. */
#ifndef XF_NAMES_H
#define XF_NAMES_H
#include "lib/collections.h"
#include "lib/files.h"
#include "lib/strings.h"

/* names.devices_from_annotations over the cdi.k8s.io/ members of state's
 * then config's annotations (objects or NULL; config's win on a repeated
 * key, as state.container): their devices, in key order, added to out.
 * XF_ERR for any key or value the Python code would refuse, or read in
 * a way this code does not (non-ASCII, a value that is not a string). */
int rq_annotation_names(const fj *ann_state, const fj *ann_config, struct rq_names *out);

#endif
