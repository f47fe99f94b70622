/* See find_runtime.h. */
#include "runtime/find_runtime.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* A regular file (after symlinks) we may execute */
static int executable(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* This wrapper's file, known by its inode: a candidate runtime that is the
 * same file (through a symlink or a hard link) would exec us again. */
struct selves {
    const char *self;
    int known, ok;
    dev_t dev;
    ino_t ino;
};

/* 1 when path is this wrapper's file, 0 when not, -1 when either cannot be
 * looked at (then nobody can tell). */
static int is_self(struct selves *s, const char *path)
{
    struct stat st;

    if (!s->known) {
        s->known = 1;
        s->ok = stat(s->self, &st) == 0;
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    if (!s->ok || stat(path, &st) != 0)
        return -1;
    return st.st_dev == s->dev && st.st_ino == s->ino;
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
            return xf_say(XF_ERR, "XPU_CDI_RUNTIME='%s' is this wrapper (or its real path is unknown): point it at "
                          "runc or crun", name);
        *out = name;
        return XF_OK;
    }
    p = path_env && *path_env ? path_env : DEFAULT_PATH;
    for (;;) {
        const char *end = strchrnul(p, ':');
        size_t n = (size_t)(end - p);
        /* an empty PATH entry is the current dir */
        const char *cand = n == 0 ? xf_printf("./%s", name)
                         : p[n - 1] == '/' ? xf_printf("%.*s%s", (int)n, p, name)
                                           : xf_printf("%.*s/%s", (int)n, p, name);
        if (executable(cand)) {
            int me = is_self(&s, cand);
            if (me < 0)
                return xf_say(XF_ERR, "cannot tell whether '%s' is this wrapper (its real path is unknown): set "
                              "XPU_CDI_RUNTIME to the runtime's absolute path", cand);
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
