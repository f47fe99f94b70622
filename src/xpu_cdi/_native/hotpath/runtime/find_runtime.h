/* Which runtime the wrapper runs (find_runtime.c). */
#ifndef XF_FIND_RUNTIME_H
#define XF_FIND_RUNTIME_H
#include "lib/common.h"

/* The runtime to exec: XPU_CDI_RUNTIME (a path, or a name on PATH), else
 * runc on PATH (default PATH when empty), skipping this wrapper's own file
 * (self, e.g. /proc/self/exe: the same inode, through a symlink or a hard
 * link).  *out is the path to exec.  XF_ERR (worded) when there is none or
 * the variable names the wrapper itself. */
int xf_find_runtime(const char *runtime_env, const char *path_env, const char *self, const char **out);

#endif
