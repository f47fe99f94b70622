/* The small containers the CDI modules share (collections.c): a string
 * map, a pointer vector, an ordered set of names. */
#ifndef XF_COLLECTIONS_H
#define XF_COLLECTIONS_H
#include <stddef.h>

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

/* An ordered set of names: each once, in the order first added. */
struct rq_names {
    struct rq_vec list;
    struct rq_map seen;
};
void rq_names_add(struct rq_names *s, const char *name);

#endif
