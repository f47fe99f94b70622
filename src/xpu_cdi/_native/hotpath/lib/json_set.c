/* A set of JSON values under fj_equal (json.h), by hashing: the wrapper's
 * "is this node's path / allow rule already in config.json" questions,
 * which a scan answered in time quadratic in the cards (4096 cards: 4 s).
 * fj_hash agrees with fj_equal (equal values hash alike), so a bucket
 * holding a value is confirmed with fj_equal and nothing else decides. */
#include "lib/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint64_t bytes_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t fj_hash(const fj *v)
{
    uint64_t h;

    if (v == NULL)
        return 0;
    h = (uint64_t)v->type * 0x9e3779b97f4a7c15ULL;
    switch (v->type) {
    case FJ_NULL:
    case FJ_FALSE:
    case FJ_TRUE:
        return mix(h);
    case FJ_NUMBER: /* as numbers_equal: integers by value, the others by their text */
        if (v->is_int)
            return mix(h ^ (uint64_t)v->num);
        return mix(h ^ (v->str != NULL ? bytes_hash(v->str, strlen(v->str)) : 0));
    case FJ_STRING:
        return mix(h ^ bytes_hash(v->str, v->len));
    case FJ_ARRAY: /* in order */
        for (size_t i = 0; i < v->n; i++)
            h = mix(h * 31 + fj_hash(v->items[i]));
        return h;
    case FJ_OBJECT: /* members in any order: a sum does not depend on it */
        for (size_t i = 0; i < v->n; i++)
            h += mix(fj_hash(v->keys[i]) * 31 + fj_hash(v->items[i]));
        return mix(h);
    }
    return h;
}

static void grow(struct fj_valset *s)
{
    struct fj_valset bigger = {.cap = s->cap ? s->cap * 2 : 64};

    bigger.slots = xf_alloc(bigger.cap * sizeof(*bigger.slots));
    bigger.hashes = xf_alloc(bigger.cap * sizeof(*bigger.hashes));
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i] != NULL)
            fj_valset_add(&bigger, s->slots[i]);
    free(s->slots);
    free(s->hashes);
    *s = bigger;
}

/* The slot of v, or the empty slot where it would go. */
static size_t slot_of(const struct fj_valset *s, const fj *v, uint64_t h)
{
    size_t i = h & (s->cap - 1);

    while (s->slots[i] != NULL && !(s->hashes[i] == h && fj_equal(s->slots[i], v)))
        i = (i + 1) & (s->cap - 1);
    return i;
}

int fj_valset_has(const struct fj_valset *s, const fj *v)
{
    return s->cap > 0 && v != NULL && s->slots[slot_of(s, v, fj_hash(v))] != NULL;
}

int fj_valset_add(struct fj_valset *s, const fj *v)
{
    uint64_t h;
    size_t i;

    if (v == NULL)
        return 0;
    if (2 * (s->n + 1) > s->cap)
        grow(s);
    h = fj_hash(v);
    i = slot_of(s, v, h);
    if (s->slots[i] != NULL)
        return 0;
    s->slots[i] = v;
    s->hashes[i] = h;
    s->n++;
    return 1;
}

void fj_valset_free(struct fj_valset *s)
{
    free(s->slots);
    free(s->hashes);
    *s = (struct fj_valset){0};
}
