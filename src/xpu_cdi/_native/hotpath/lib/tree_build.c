/* See tree_build.h. */
#include "lib/tree_build.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CHUNK ((size_t)64 << 20)

void *xf_arena_grow(struct xf_arena *a, size_t n)
{
    size_t size = a->next < n ? n : a->next;

    /* not zeroed here: a chunk is sized for the worst case, and zeroing
     * it all would fault in pages a small document never uses */
    a->p = xf_malloc(size);
    a->left = size;
    if (a->next < MAX_CHUNK)
        a->next *= 2;
    return xf_arena_get(a, n);
}

char *xf_arena_text(struct xf_arena *a, const char *s, size_t n)
{
    char *t = xf_arena_get(a, n + 1);

    memcpy(t, s, n);
    t[n] = '\0';
    return t;
}

static int same_key(const fj *a, const fj *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

int xf_key_among(fj *const *stack, size_t from, size_t to, const fj *key)
{
    for (size_t i = from; i < to; i += 2)
        if (same_key(stack[i], key))
            return 1;
    return 0;
}

void xf_take_members(struct xf_arena *a, fj *v, fj *const *stack, size_t from, size_t to)
{
    size_t n = to - from;

    if (v->type == FJ_OBJECT) {
        n /= 2;
        v->keys = xf_arena_get(a, n * sizeof(fj *));
        v->items = xf_arena_get(a, n * sizeof(fj *));
        for (size_t i = 0; i < n; i++) {
            v->keys[i] = stack[from + 2 * i];
            v->items[i] = stack[from + 2 * i + 1];
        }
    } else {
        v->items = xf_arena_get(a, n * sizeof(fj *));
        if (n > 0)
            memcpy(v->items, stack + from, n * sizeof(fj *));
    }
    v->n = v->cap = n;
}

static int key_order(const void *x, const void *y)
{
    const fj *a = *(fj *const *)x, *b = *(fj *const *)y;
    int c = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);

    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

const fj *xf_repeated_key(const fj *v)
{
    fj **sorted;
    const fj *twice = NULL;

    if (v->type != FJ_OBJECT || v->n < 2)
        return NULL;
    sorted = xf_malloc(v->n * sizeof(*sorted));
    memcpy(sorted, v->keys, v->n * sizeof(*sorted));
    qsort(sorted, v->n, sizeof(*sorted), key_order);
    for (size_t i = 1; i < v->n && twice == NULL; i++)
        if (same_key(sorted[i - 1], sorted[i]))
            twice = sorted[i];
    free(sorted);
    return twice;
}
