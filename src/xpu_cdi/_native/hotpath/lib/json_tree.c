/* The JSON tree's access, comparison and editing (see json.h); parsing
 * and writing, by yajl, are json_parse.c's and json_write.c's. */
#include "lib/json.h"

#include <stdlib.h>
#include <string.h>

/* ---- access --------------------------------------------------------- */

fj *fj_get(const fj *obj, const char *key)
{
    size_t klen, i;

    if (obj == NULL || obj->type != FJ_OBJECT || key == NULL)
        return NULL;
    klen = strlen(key);
    for (i = obj->n; i-- > 0;) {
        const fj *k = obj->keys[i];
        if (k->len == klen && memcmp(k->str, key, klen) == 0)
            return obj->items[i];
    }
    return NULL;
}

const char *fj_str(const fj *v)
{
    if (v == NULL || v->type != FJ_STRING || v->has_nul)
        return NULL;
    return v->str;
}

/* ---- equality (the rule is in json.h) ------------------------------- */

static int numbers_equal(const fj *a, const fj *b)
{
    if (a->is_int || b->is_int)
        return a->is_int && b->is_int && a->num == b->num;
    return a->str != NULL && b->str != NULL && strcmp(a->str, b->str) == 0;
}

static int keys_equal(const fj *a, const fj *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* qsort_r order of member indexes by key (keys are unique: no ties). */
static int member_cmp(const void *x, const void *y, void *arg)
{
    const fj *obj = arg, *a = obj->keys[*(const size_t *)x], *b = obj->keys[*(const size_t *)y];
    int c = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);

    return c != 0 ? c : a->len < b->len ? -1 : a->len > b->len;
}

static size_t *sorted_members(const fj *obj)
{
    size_t *v = xf_alloc(obj->n * sizeof(*v) + 1);

    for (size_t i = 0; i < obj->n; i++)
        v[i] = i;
    qsort_r(v, obj->n, sizeof(*v), member_cmp, (void *)obj);
    return v;
}

/* The same members in any order.  Small objects (the usual case) by
 * look-up, large ones (a fuzzer's) member by member in key order. */
static int objects_equal(const fj *a, const fj *b)
{
    size_t *ia, *ib, i;
    int eq = 1;

    if (a->n != b->n)
        return 0;
    if (a->n <= 16) {
        for (i = 0; i < a->n && eq; i++) {
            size_t j = 0;
            while (j < b->n && !keys_equal(a->keys[i], b->keys[j]))
                j++;
            eq = j < b->n && fj_equal(a->items[i], b->items[j]);
        }
        return eq;
    }
    ia = sorted_members(a);
    ib = sorted_members(b);
    for (i = 0; i < a->n && eq; i++)
        eq = keys_equal(a->keys[ia[i]], b->keys[ib[i]]) && fj_equal(a->items[ia[i]], b->items[ib[i]]);
    free(ia);
    free(ib);
    return eq;
}

int fj_equal(const fj *a, const fj *b)
{
    size_t i;

    if (a == NULL || b == NULL)
        return a == b;
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case FJ_NULL:
    case FJ_FALSE:
    case FJ_TRUE:
        return 1;
    case FJ_NUMBER:
        return numbers_equal(a, b);
    case FJ_STRING:
        return keys_equal(a, b);
    case FJ_ARRAY:
        if (a->n != b->n)
            return 0;
        for (i = 0; i < a->n; i++)
            if (!fj_equal(a->items[i], b->items[i]))
                return 0;
        return 1;
    case FJ_OBJECT:
        return objects_equal(a, b);
    }
    return 0;
}

/* ---- building and editing ------------------------------------------- */

fj *fj_new(enum fj_type type)
{
    fj *v = xf_alloc(sizeof(*v));
    v->type = type;
    if (type == FJ_NUMBER)
        v->is_int = 1;  /* a valid 0 rather than a number without text */
    return v;
}

fj *fj_new_str(const char *s)
{
    fj *v = fj_new(FJ_STRING);
    if (s == NULL)
        s = "";
    v->len = strlen(s);
    v->str = xf_strndup(s, v->len);
    return v;
}

fj *fj_new_int(long long n)
{
    fj *v = fj_new(FJ_NUMBER);
    char *text = xf_printf("%lld", n);
    v->is_int = 1;
    v->num = n;
    v->str = text;
    v->len = strlen(text);
    return v;
}

/* Room for one more member: member arrays double (the old ones may live
 * in a parser's arena, so they are left behind rather than realloc'ed). */
static void grow(fj *c)
{
    size_t cap;
    fj **items, **keys = NULL;

    if (c->n < c->cap)
        return;
    cap = c->cap < 4 ? 8 : 2 * c->cap;
    items = xf_alloc(cap * sizeof(*items));
    if (c->n)
        memcpy(items, c->items, c->n * sizeof(*items));
    if (c->type == FJ_OBJECT) {
        keys = xf_alloc(cap * sizeof(*keys));
        if (c->n)
            memcpy(keys, c->keys, c->n * sizeof(*keys));
    }
    c->items = items;
    c->keys = keys;
    c->cap = cap;
}

void fj_append(fj *array, fj *item)
{
    if (array == NULL || array->type != FJ_ARRAY || item == NULL)
        return;
    grow(array);
    array->items[array->n++] = item;
}

void fj_set(fj *obj, const char *key, fj *value)
{
    size_t klen, i;

    if (obj == NULL || obj->type != FJ_OBJECT || key == NULL || value == NULL)
        return;
    klen = strlen(key);
    for (i = obj->n; i-- > 0;) {
        const fj *k = obj->keys[i];
        if (k->len == klen && memcmp(k->str, key, klen) == 0) {
            obj->items[i] = value;
            return;
        }
    }
    grow(obj);
    obj->keys[obj->n] = fj_new_str(key);
    obj->items[obj->n] = value;
    obj->n++;
}

static fj *container_at(fj *obj, const char *key, enum fj_type type)
{
    fj *v;

    if (obj == NULL || obj->type != FJ_OBJECT)
        return NULL;
    v = fj_get(obj, key);
    if (v == NULL || v->type != type) {
        v = fj_new(type);
        fj_set(obj, key, v);
    }
    return v;
}

fj *fj_object_at(fj *obj, const char *key)
{
    return container_at(obj, key, FJ_OBJECT);
}

fj *fj_array_at(fj *obj, const char *key)
{
    return container_at(obj, key, FJ_ARRAY);
}

int fj_str_eq(const fj *v, const char *s, size_t n)
{
    return v != NULL && v->type == FJ_STRING && v->len == n && memcmp(v->str, s, n) == 0;
}

int fj_str_starts(const fj *v, const char *prefix, size_t n)
{
    return v != NULL && v->type == FJ_STRING && v->len >= n && memcmp(v->str, prefix, n) == 0;
}
