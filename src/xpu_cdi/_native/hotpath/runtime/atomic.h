/* Writing config.json atomically (atomic.c). */
#ifndef XF_ATOMIC_H
#define XF_ATOMIC_H
#include "lib/common.h"

/* atomic.write_atomic(path, data, mode, durable=False): a temp file
 * ".<base>.<pid>.xpu-cdi-tmp" beside path with exactly mode, renamed over
 * path; the temp file is removed on failure (XF_ERR). */
int xf_write_atomic(const char *path, const char *data, size_t len, unsigned mode);

#endif
