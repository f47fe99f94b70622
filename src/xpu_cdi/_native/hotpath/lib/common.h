/* What both binaries share: the error convention (docs/architecture.md,
 * "The compiled hot path"), allocation, buffers, whole-file reads.
 *
 * A function that cannot do its job returns XF_ERR with xf_reason one line
 * saying what is wrong (callers add what they were doing: xf_wrap); XF_FAIL
 * only when a change could not be undone.  kernel/ returns -errno instead.
 * Nothing is freed: the processes are short-lived and inputs size-limited. */
#ifndef XF_COMMON_H
#define XF_COMMON_H
#define _GNU_SOURCE
#include <stddef.h>

#define XF_OK 0     /* done */
#define XF_ERR 1    /* refused or failed, nothing left behind: report xf_reason */
#define XF_FAIL 2   /* failed and could not be undone whole (an undo failed): report xf_reason */

/* What the last XF_ERR / XF_FAIL was (one line, shown to the user). */
extern char xf_reason[1024];
/* Whether xf_reason names what failed first ("mount source 'X' ..."), so a
 * caller does not put its own name for it first again: set by xf_named,
 * cleared by xf_say and xf_wrap. */
extern int xf_reason_named;

/* Set xf_reason from a printf format and return code (XF_ERR or XF_FAIL). */
int xf_say(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put "<what>: " before xf_reason (the cause a callee gave) and return code:
 * how a caller adds what it was doing to a failure. */
int xf_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put the formatted text after xf_reason (a hint, where it was looked) and return code. */
int xf_append(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Mark the reason just said as naming what failed (xf_reason_named) and return code:
 * return xf_named(xf_say(XF_ERR, "mount source '%s': ...", ...)). */
int xf_named(int code);

/* Allocation that never fails (aborts on out-of-memory) and is never freed. */
void *xf_alloc(size_t n);
void *xf_malloc(size_t n); /* the same, not zeroed (for memory filled before it is read) */
void *xf_realloc(void *p, size_t n);
char *xf_strdup(const char *s);
char *xf_strndup(const char *s, size_t n);
char *xf_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xf_strcat3(const char *a, const char *b, const char *c); /* a b c joined (paths, names: no printf) */

/* Growable byte buffer (for serialising JSON and building lines). */
struct xf_buf {
    char *data;
    size_t len, cap;
};
void xf_buf_add(struct xf_buf *b, const char *s, size_t n);
void xf_buf_adds(struct xf_buf *b, const char *s);
void xf_buf_addf(struct xf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The next component of a path at or after p (slashes skipped): its start,
 * with its length in *len (0 when none is left). */
const char *xf_component(const char *p, size_t *len);

/* Whole file (or fd) up to limit bytes, NUL-terminated; XF_ERR (reason
 * set) when it cannot be read or is larger than limit.  *mode gets the
 * permission bits when mode is not NULL.  xf_read_fd reads at most
 * limit + 1 bytes and leaves what it read in *data / *len even when it
 * fails. */
int xf_read_file(const char *path, size_t limit, char **data, size_t *len, unsigned *mode);
int xf_read_fd(int fd, size_t limit, char **data, size_t *len);
/* xf_read_fd given the fd's fstat (NULL: none known, read to a 0). */
struct stat;
int xf_read_fd_stat(int fd, const struct stat *st, size_t limit, char **data, size_t *len);
/* xf_read_file of a /proc/<pid>/ file printed in one piece (status,
 * cgroup: the kernel's single_open files): one read, no fstat. */
int xf_read_proc_one(const char *path, size_t limit, char **data, size_t *len);

#endif
