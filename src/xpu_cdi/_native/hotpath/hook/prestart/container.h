/* The container's namespaces (container.c). */
#ifndef XF_CONTAINER_H
#define XF_CONTAINER_H
#include "lib/common.h"

int same_ns(int pid, const char *name);
int root_owner(int pid, const char *kind, unsigned *out);
int open_namespaces(int pid, int *fds, int *types, size_t *n);

#endif
