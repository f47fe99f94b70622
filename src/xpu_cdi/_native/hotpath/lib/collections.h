/* The small containers the CDI modules share (collections.c): a string
 * map, a pointer vector, an ordered set of names. */
#ifndef XF_COLLECTIONS_H
#define XF_COLLECTIONS_H
#include <stddef.h>

/* A string-keyed hash map (open addressing); values are never NULL.
 * Zero-initialised is empty; keys are borrowed, never copied. */
struct xf_strmap {
    const char **keys;
    void **vals;
    size_t cap, n;
};
void *xf_strmap_get(const struct xf_strmap *m, const char *key);
/* Set key to val (replacing); returns the previous value or NULL. */
void *xf_strmap_put(struct xf_strmap *m, const char *key, void *val);

/* A growable array of pointers (zero-initialised is empty). */
struct xf_ptrvec {
    const void **v;
    size_t n, cap;
};
void xf_ptrvec_add(struct xf_ptrvec *a, const void *p);

/* An ordered set of names: each once, in the order first added. */
struct xf_nameset {
    struct xf_ptrvec list;
    struct xf_strmap seen;
};
void xf_nameset_add(struct xf_nameset *s, const char *name);

#endif
