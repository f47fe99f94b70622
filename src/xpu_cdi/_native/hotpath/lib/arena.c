/* See arena.h. */
#include "lib/arena.h"
#include "lib/common.h"

#include <string.h>

#define MAX_CHUNK ((size_t)64 << 20)

void *xf_arena_get(struct xf_arena *a, size_t n)
{
    void *r;

    n = (n + 7) & ~(size_t)7;  /* keeps every node and pointer array aligned */
    if (n > a->left) {
        size_t size = a->next < n ? n : a->next;
        /* not zeroed here: a chunk is sized for the worst case, and zeroing
         * it all would fault in pages a small document never uses */
        a->p = xf_malloc(size);
        a->left = size;
        if (a->next < MAX_CHUNK)
            a->next *= 2;
    }
    r = a->p;
    a->p += n;
    a->left -= n;
    return memset(r, 0, n);
}

char *xf_arena_text(struct xf_arena *a, const char *s, size_t n)
{
    char *t = xf_arena_get(a, n + 1);

    memcpy(t, s, n);
    t[n] = '\0';
    return t;
}
