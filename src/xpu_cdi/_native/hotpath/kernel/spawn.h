/* Running a program of the image confined (spawn.c). */
#ifndef XF_SPAWN_H
#define XF_SPAWN_H
#include <stddef.h>

/* fork, join nns namespaces (nsfds/nstypes), chroot to root, drop every
 * capability, exec argv (argc NUL-separated strings) with envp; kill it
 * after timeout_ms.  Its output (up to outlen) in out, its wait status in
 * *status.  0 or -errno. */
int xc_spawn_confined(const char *root, const char *argv, size_t argc,
                      const char *envp, size_t envc, const int *nsfds,
                      const int *nstypes, size_t nns, int timeout_ms,
                      char *out, size_t outlen, int *status);

#endif
