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

static size_t map_find(const struct xf_strmap *m, const char *key)
{
    size_t i = hash_str(key) & (m->cap - 1);

    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *xf_strmap_get(const struct xf_strmap *m, const char *key)
{
    return m->cap == 0 ? NULL : m->vals[map_find(m, key)];
}

/* Set key to val (replacing); returns the previous value or NULL. */
void *xf_strmap_put(struct xf_strmap *m, const char *key, void *val)
{
    size_t i;
    void *old;

    if ((m->n + 1) * 2 > m->cap) {
        struct xf_strmap bigger = {NULL, NULL, m->cap ? m->cap * 2 : 16, 0};
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

void xf_ptrvec_add(struct xf_ptrvec *a, const void *p)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = xf_realloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = p;
}

void xf_nameset_add(struct xf_nameset *s, const char *name)
{
    if (xf_strmap_get(&s->seen, name) == NULL) {
        xf_strmap_put(&s->seen, name, (void *)name);
        xf_ptrvec_add(&s->list, name);
    }
}
