/* Internal to runtime/edit/: tree helpers the edits share (util.c). */
#ifndef XF_EDIT_UTIL_H
#define XF_EDIT_UTIL_H
#include "lib/request.h"

struct span {
    const char *p;
    size_t n;
};

fj *getv(const fj *obj, const char *key);
int int_or_absent(const fj *v);
void keep_unless(fj *a, int (*drop)(const fj *item, const void *arg), const void *arg);
int contains(const fj *a, const fj *v);

int apply_nodes(fj *config, const struct xf_edits *e);
int apply_mounts(fj *config, const struct xf_edits *e);
int apply_env(fj *config, const struct xf_edits *e);

#endif
