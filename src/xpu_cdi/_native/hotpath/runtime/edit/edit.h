/* Applying merged CDI edits to config.json's tree (runtime/edit/). */
#ifndef XF_EDIT_H
#define XF_EDIT_H
#include "lib/request.h"

/* Apply merged edits to config.json: each node, mount and hook read from
 * its own JSON in the spec (its json member) and edits->gids as
 * additionalGids.  The tree may be partly edited when this
 * returns XF_ERR: drop it then. */
int xf_apply(fj *config, const struct xf_edits *edits);

#endif
