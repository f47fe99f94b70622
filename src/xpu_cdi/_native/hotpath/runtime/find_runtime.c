/* See find_runtime.h. */
#include "runtime/find_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* wrapper._executable: a regular file (after symlinks) we may execute */
static int executable(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The real paths that are this wrapper: the binary and its Python half. */
struct selves {
    const char *self;
    int known;
    char *me, *me_py;
};

/* 1 when path is a copy of the wrapper, 0 when not, -1 when its real path
 * cannot be found (Python's non-strict realpath would still answer). */
static int is_self(struct selves *s, const char *path)
{
    char *real;
    int same;

    if (!s->known) {
        s->known = 1;
        s->me = realpath(s->self, NULL);
        if (s->me != NULL)
            s->me_py = realpath(xf_printf("%s.py", s->me), NULL);
    }
    if (s->me == NULL)
        return -1;
    real = realpath(path, NULL);
    if (real == NULL)
        return -1;
    same = strcmp(real, s->me) == 0 || (s->me_py != NULL && strcmp(real, s->me_py) == 0);
    free(real);
    return same;
}

int xf_find_runtime(const char *runtime_env, const char *path_env, const char *self, const char **out)
{
    struct selves s = {.self = self};
    const char *name = runtime_env && *runtime_env ? runtime_env : "runc";
    const char *p;

    if (strchr(name, '/') != NULL) {
        if (!executable(name))
            return xf_say(XF_ERR, "XPU_CDI_RUNTIME='%s' is not an executable file: point it at runc or crun", name);
        if (is_self(&s, name) != 0)
            return xf_say(XF_ERR, "XPU_CDI_RUNTIME='%s' is this wrapper (or its real path is unknown): point it at runc or crun", name);
        *out = name;
        return XF_OK;
    }
    p = path_env && *path_env ? path_env : DEFAULT_PATH;
    for (;;) {
        const char *end = strchrnul(p, ':');
        size_t n = (size_t)(end - p);
        /* os.path.join(d or ".", name) */
        const char *cand = n == 0 ? xf_printf("./%s", name)
                         : p[n - 1] == '/' ? xf_printf("%.*s%s", (int)n, p, name)
                                           : xf_printf("%.*s/%s", (int)n, p, name);
        if (executable(cand)) {
            int me = is_self(&s, cand);
            if (me < 0)
                return xf_say(XF_ERR, "cannot tell whether '%s' is this wrapper (its real path is unknown): set XPU_CDI_RUNTIME to "
                                  "the runtime's absolute path", cand);
            if (me == 0) {
                *out = cand;
                return XF_OK;
            }
        }
        if (*end == '\0')
            break;
        p = end + 1;
    }
    return xf_say(XF_ERR, "no '%s' found on PATH (%s): install it or set XPU_CDI_RUNTIME to the runtime's absolute "
                  "path", name, path_env && *path_env ? path_env : DEFAULT_PATH);
}
