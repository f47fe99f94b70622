/* Internal to the spec registry (spec_dirs.c reads the dirs, registry.c
 * resolves names and merges edits; the public API is request.h). */
#ifndef XF_REGISTRY_H
#define XF_REGISTRY_H
#include "lib/collections.h"
#include "lib/json.h"

struct spec {
    const char *path;
    const fj *edits;  /* the spec's top-level containerEdits object, or NULL */
};

struct device {
    const struct spec *spec;
    const fj *edits;  /* the device's containerEdits */
};

/* The specs of spec dir d into all (qualified name -> struct device),
 * replacing what earlier (lower-priority) dirs defined; what is skipped is
 * added to xf_spec_problems. */
void xf_load_spec_dir(const char *d, struct xf_strmap *all);

#endif
