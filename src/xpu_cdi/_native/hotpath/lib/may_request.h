/* The cheap test on config.json's bytes (may_request.c), both binaries':
 * can this container ask for a device at all?  Most cannot, and then no
 * index is parsed (nor, by the wrapper, config.json). */
#ifndef XF_MAY_REQUEST_H
#define XF_MAY_REQUEST_H
#include <stddef.h>

/* The cheap test on config.json's raw bytes: 0 only when they hold no
 * "cdi.k8s.io" and no `"NAME=` for a selection variable (an upper-case
 * identifier of the hook indexes' text in dirs, or a known one). */
int xf_may_request(const char *data, size_t len, const char *const *dirs, size_t ndirs);

#endif
