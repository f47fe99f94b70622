/* See collections.h. */
#include "lib/collections.h"
#include "lib/common.h"

#include <stdlib.h>
#include <string.h>

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t map_find(const struct rq_map *m, const char *key)
{
    size_t i = hash_str(key) & (m->cap - 1);

    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *rq_map_get(const struct rq_map *m, const char *key)
{
    return m->cap == 0 ? NULL : m->vals[map_find(m, key)];
}

/* Set key to val (replacing); returns the previous value or NULL. */
void *rq_map_put(struct rq_map *m, const char *key, void *val)
{
    size_t i;
    void *old;

    if ((m->n + 1) * 2 > m->cap) {
        struct rq_map bigger = {NULL, NULL, m->cap ? m->cap * 2 : 16, 0};
        bigger.keys = xf_alloc(bigger.cap * sizeof(*bigger.keys));
        bigger.vals = xf_alloc(bigger.cap * sizeof(*bigger.vals));
        for (i = 0; i < m->cap; i++)
            if (m->keys[i] != NULL) {
                size_t j = map_find(&bigger, m->keys[i]);
                bigger.keys[j] = m->keys[i];
                bigger.vals[j] = m->vals[i];
                bigger.n++;
            }
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    i = map_find(m, key);
    old = m->vals[i];
    if (m->keys[i] == NULL) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return old;
}

void rq_vec_add(struct rq_vec *a, const void *p)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = xf_realloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = p;
}

void rq_names_add(struct rq_names *s, const char *name)
{
    if (rq_map_get(&s->seen, name) == NULL) {
        rq_map_put(&s->seen, name, (void *)name);
        rq_vec_add(&s->list, name);
    }
}
