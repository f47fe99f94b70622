/* Applying merged CDI edits to config.json's tree (runtime/edit/). */
#ifndef XF_EDIT_H
#define XF_EDIT_H
#include "lib/request.h"

/* ociedit.apply of merged edits (the nodes', mounts' and hooks' json
 * members are what is applied, as Python applies the spec's dicts) and
 * edits->gids as additionalGids.  The tree may be partly edited when this
 * returns XF_ERR: drop it then. */
int xf_apply(fj *config, const struct xf_edits *edits);

#endif
