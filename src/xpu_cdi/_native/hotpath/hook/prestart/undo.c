/* The undo journal: see undo.h. */
#include "hook/prestart/undo.h"

#include <string.h>
#include <unistd.h>

void xf_undo_push(struct xf_undo *u, const char *what, int (*fn)(const long *args),
                  long a0, long a1, long a2, long a3)
{
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 16;
        u->steps = xf_realloc(u->steps, u->cap * sizeof(*u->steps));
    }
    u->steps[u->n].what = what;
    u->steps[u->n].fn = fn;
    u->steps[u->n].args[0] = a0;
    u->steps[u->n].args[1] = a1;
    u->steps[u->n].args[2] = a2;
    u->steps[u->n].args[3] = a3;
    u->n++;
}

int xf_undo_keep_fd(struct xf_undo *u, int fd)
{
    if (u->nfds == u->capfds) {
        u->capfds = u->capfds ? 2 * u->capfds : 16;
        u->fds = xf_realloc(u->fds, u->capfds * sizeof(*u->fds));
    }
    u->fds[u->nfds++] = fd;
    return fd;
}

int xf_undo_keeps(const struct xf_undo *u, int fd)
{
    for (size_t i = 0; i < u->nfds; i++)
        if (u->fds[i] == fd)
            return 1;
    return 0;
}

size_t xf_undo_rollback(struct xf_undo *u, const char **failed)
{
    struct xf_buf b = {0};
    size_t nfailed = 0;

    while (u->n > 0) {
        struct xf_undo_step *s = &u->steps[--u->n];
        int rv = s->fn(s->args);
        if (rv != 0) {
            xf_buf_addf(&b, "%s%s: %s", nfailed ? "; " : "", s->what, strerror(-rv));
            nfailed++;
        }
    }
    *failed = nfailed ? b.data : NULL;
    xf_undo_close(u);
    return nfailed;
}

void xf_undo_close(struct xf_undo *u)
{
    u->n = 0;
    while (u->nfds > 0)
        close(u->fds[--u->nfds]);
}
