/* Internal to the tree builders (json_parse.c, yaml_load.c): one bump
 * arena per parsed document, so a tree costs a handful of allocations
 * however many nodes it has (never freed: see common.h). */
#ifndef XF_ARENA_H
#define XF_ARENA_H
#include <stddef.h>

struct xf_arena {
    char *p;      /* free space of the current chunk */
    size_t left;  /* bytes of it */
    size_t next;  /* size of the next chunk (set it before the first use) */
};

void *xf_arena_get(struct xf_arena *a, size_t n);                   /* n zeroed bytes, 8-aligned */
char *xf_arena_text(struct xf_arena *a, const char *s, size_t n);   /* s[0:n], NUL-terminated */

#endif
