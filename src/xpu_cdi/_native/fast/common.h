/* The compiled front end ("fast path") of xpu-cdi-hook and
 * xpu-container-runtime: shared conventions.
 *
 * The Python implementation (xpu_cdi.hook, xpu_cdi.runtime.wrapper) is the
 * reference and handles everything.  The front end handles the common case
 * itself -- valid inputs, JSON specs it fully understands, a successful
 * injection -- and for anything else "defers": it execs the Python
 * implementation with the same arguments and the same input, which then
 * does the whole job and reports any error in its own words.  So the front
 * end never needs an error message of its own for bad input; it only needs
 * to recognise that something is unusual and give a reason (logged).
 *
 * Memory: the processes are short-lived, so everything is allocated from
 * xf_alloc and never freed (bounded: inputs are size-limited). */
#ifndef XF_COMMON_H
#define XF_COMMON_H
#define _GNU_SOURCE
#include <stddef.h>

#define XF_OK 0     /* done */
#define XF_DEFER 1  /* not handled here: hand the request to the Python implementation */
#define XF_FAIL 2   /* a failure that must not be retried (e.g. an undo failed): report xf_reason */

/* Why the last XF_DEFER / XF_FAIL happened (one line, for the log). */
extern char xf_reason[1024];

/* Set xf_reason from a printf format and return code (XF_DEFER or XF_FAIL). */
int xf_say(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation that never fails (aborts on out-of-memory) and is never freed. */
void *xf_alloc(size_t n);
void *xf_realloc(void *p, size_t n);
char *xf_strdup(const char *s);
char *xf_strndup(const char *s, size_t n);
char *xf_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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

/* Whole file (or fd) up to limit bytes, NUL-terminated; XF_DEFER (reason
 * set) when it cannot be read or is larger than limit.  *mode gets the
 * permission bits when mode is not NULL.  xf_read_fd reads at most
 * limit + 1 bytes and leaves what it read in *data / *len even when it
 * fails. */
int xf_read_file(const char *path, size_t limit, char **data, size_t *len, unsigned *mode);
int xf_read_fd(int fd, size_t limit, char **data, size_t *len);

/* Replace this process by the Python implementation installed beside the
 * binary (the real path of /proc/self/exe plus ".py", written by
 * `install-launcher`), with the same arguments and environment.  When
 * stdin_data is not NULL it becomes the new stdin (a memfd: the front end
 * has already read the OCI state).  Does not return; if the exec fails it
 * prints one line naming the file and exits 1. */
void xf_exec_python(const char *prog, char **argv, const char *stdin_data, size_t stdin_len)
    __attribute__((noreturn));

#endif
