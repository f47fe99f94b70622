/* Internal to the tree builders (json_parse.c, yaml_load.c): what both do
 * alike.  One bump arena per parsed document, so a tree costs a handful of
 * allocations however many nodes it has (never freed: see common.h); the
 * members of open containers kept on the builder's stack and moved into
 * the container when it ends; repeated keys refused. */
#ifndef XF_TREE_BUILD_H
#define XF_TREE_BUILD_H
#include "lib/json.h"

#include <string.h>

struct xf_arena {
    char *p;      /* free space of the current chunk */
    size_t left;  /* bytes of it */
    size_t next;  /* size of the next chunk (set it before the first use) */
};

void *xf_arena_grow(struct xf_arena *a, size_t n);  /* xf_arena_get from a new chunk */

/* n zeroed bytes, 8-aligned (inline: a tree takes one per node) */
static inline void *xf_arena_get(struct xf_arena *a, size_t n)
{
    void *r;

    n = (n + 7) & ~(size_t)7;  /* keeps every node and pointer array aligned */
    if (n > a->left)
        return xf_arena_grow(a, n);
    r = a->p;
    a->p += n;
    a->left -= n;
    return memset(r, 0, n);
}

char *xf_arena_text(struct xf_arena *a, const char *s, size_t n);   /* s[0:n], NUL-terminated */

/* Objects up to this many members are checked for a repeated key as each
 * key comes (the message can point at it); larger ones once, sorted, when
 * they end (xf_repeated_key): linear in both. */
#define XF_LINEAR_KEYS 32

/* Whether key is one of the keys of stack[from:to] (keys and values
 * alternating; stack may be NULL when from == to). */
int xf_key_among(fj *const *stack, size_t from, size_t to, const fj *key);

/* The members stack[from:to] (an object's keys and values alternating)
 * into v's own arrays, in the arena. */
void xf_take_members(struct xf_arena *a, fj *v, fj *const *stack, size_t from, size_t to);

/* A key that object v holds twice (a sorted look, for large objects), or NULL. */
const fj *xf_repeated_key(const fj *v);

#endif
