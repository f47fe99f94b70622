/* Internal to the request modules (select.c, names.c, registry.c; their
 * public API is request.h): the small containers and Python-alike string
 * and file helpers they share, implemented in request_util.c.  Nothing
 * outside those files includes this. */
#ifndef XF_REQUEST_UTIL_H
#define XF_REQUEST_UTIL_H
#include <stddef.h>
#include <sys/stat.h>

#include "fjson.h"

#define INDEX_SUFFIX ".xpu-cdi" /* select.INDEX_SUFFIX, registry.INDEX_SUFFIX */

/* A string-keyed hash map (open addressing); values are never NULL.
 * Zero-initialised is empty; keys are borrowed, never copied. */
struct rq_map {
    const char **keys;
    void **vals;
    size_t cap, n;
};
void *rq_map_get(const struct rq_map *m, const char *key);
/* Set key to val (replacing); returns the previous value or NULL. */
void *rq_map_put(struct rq_map *m, const char *key, void *val);

/* A growable array of pointers (zero-initialised is empty). */
struct rq_vec {
    const void **v;
    size_t n, cap;
};
void rq_vec_add(struct rq_vec *a, const void *p);

/* An ordered set of names (select.requested's dict of None). */
struct rq_names {
    struct rq_vec list;
    struct rq_map seen;
};
void rq_names_add(struct rq_names *s, const char *name);

/* str.strip() of s[0:*n] for ASCII text, in place. */
void rq_strip(const char **s, size_t *n);
int rq_is_ascii(const char *s, size_t n);
int rq_ends_with(const char *s, const char *suffix);
/* os.path.join(d, name) for a plain name. */
char *rq_join(const char *d, const char *name);
/* Python's truth value of a parsed JSON value (NULL: absent, false). */
int rq_truthy(const fj *v);
/* Absent (NULL) or a list of strings: sel.get(key, []) in select, the env
 * check of registry._check_edits. */
int rq_string_list(const fj *v);
/* strcmp of two char * array elements, for qsort. */
int rq_cmp_str(const void *a, const void *b);

/* os.listdir, sorted (byte order).  0, or -errno when the dir cannot be listed. */
int rq_list_dir(const char *d, char ***names, size_t *n);

/* How reading a file went, in the terms the Python callers care about. */
enum { RD_OK, RD_OSERROR, RD_REFUSED };

/* Up to limit bytes of a regular file (NUL-terminated).  RD_OSERROR when
 * it cannot be opened or read (a directory too), RD_REFUSED for a file
 * larger than limit or of another type (a FIFO would block); either way
 * xf_reason says why, without the path. */
int rq_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st);

/* s[0:n] quoted as Python's repr() quotes ASCII text (other bytes as
 * \xNN), the way the tooling's messages show values; rq_short cuts a
 * value over 100 bytes to its first 60 and says how long it was (values
 * come from containers and may be huge). */
char *rq_quoted(const char *s, size_t n);
char *rq_short(const char *s, size_t n);

#endif
