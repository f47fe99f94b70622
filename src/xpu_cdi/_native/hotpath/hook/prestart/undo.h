/* The undo journal of the hook's injection: steps that take back what was
 * done, run newest first when a later step fails. */
#ifndef XF_UNDO_H
#define XF_UNDO_H
#include "lib/common.h"

struct xf_undo_step {
    const char *what;              /* for the message when the undo itself fails */
    int (*fn)(const long *args);   /* 0, or -errno */
    long args[4];                  /* fds, pointers (cast), flags */
};

struct xf_undo {
    struct xf_undo_step *steps;
    size_t n, cap;
    int *fds;                      /* kept open until close (the steps use them) */
    size_t nfds, capfds;
};

void xf_undo_push(struct xf_undo *u, const char *what, int (*fn)(const long *args),
                  long a0, long a1, long a2, long a3);
int xf_undo_keep_fd(struct xf_undo *u, int fd);   /* returns fd */
int xf_undo_keeps(const struct xf_undo *u, int fd); /* whether fd is kept already */
/* Run every step newest first; return how many failed, their descriptions
 * ("what: strerror", "; "-joined) in *failed (NULL when none). Closes the fds. */
size_t xf_undo_rollback(struct xf_undo *u, const char **failed);
/* Success: forget the steps, close the fds. */
void xf_undo_close(struct xf_undo *u);

#endif
