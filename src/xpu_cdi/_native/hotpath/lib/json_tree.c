/* The JSON tree's access, comparison and editing (see fjson.h); parsing
 * and writing, by yajl, are fjson.c's. */
#include "lib/json.h"

#include <stdint.h>
#include <stdio.h>
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

/* ---- equality ------------------------------------------------------- */

/* How Python sees a number (or a bool: True == 1 and False == 0.0 there). */
enum numkind { NK_INT, NK_BIGINT, NK_FLOAT, NK_NONE };

static enum numkind numkind(const fj *v, long long *i)
{
    if (v->type == FJ_TRUE || v->type == FJ_FALSE) {
        *i = v->type == FJ_TRUE;
        return NK_INT;
    }
    if (v->type != FJ_NUMBER)
        return NK_NONE;
    if (v->is_int) {
        *i = v->num;
        return NK_INT;
    }
    if (v->str == NULL)
        return NK_NONE;
    return strpbrk(v->str, ".eE") != NULL ? NK_FLOAT : NK_BIGINT;
}

/* Python compares int and float exactly (no rounding of the int). */
static int int_equals_float(enum numkind ka, const fj *a, long long ia, const fj *f)
{
    double d = strtod(f->str, NULL);
    char buf[400];

    if (!(d - d == 0))
        return 0;  /* infinite: no int equals it */
    if (d > -4503599627370496.0 && d < 4503599627370496.0 && d != (double)(long long)d)
        return 0;  /* a fraction (from 2^52 up every double is an integer) */
    if (ka == NK_INT)
        return d >= -9223372036854775808.0 && d < 9223372036854775808.0 && (long long)d == ia;
    /* A big integer: the double's exact decimal expansion (glibc prints it). */
    snprintf(buf, sizeof(buf), "%.0f", d);
    return strcmp(buf, a->str) == 0;
}

static int numbers_equal(const fj *a, const fj *b)
{
    long long ia = 0, ib = 0;
    enum numkind ka = numkind(a, &ia), kb = numkind(b, &ib);

    if (ka == NK_NONE || kb == NK_NONE)
        return 0;
    if (ka == NK_FLOAT && kb == NK_FLOAT)
        return strtod(a->str, NULL) == strtod(b->str, NULL);
    if (kb == NK_FLOAT)
        return int_equals_float(ka, a, ia, b);
    if (ka == NK_FLOAT)
        return int_equals_float(kb, b, ib, a);
    if (ka == NK_INT && kb == NK_INT)
        return ia == ib;
    if (ka == NK_BIGINT && kb == NK_BIGINT)  /* JSON spells an integer one way */
        return strcmp(a->str, b->str) == 0;
    return 0;  /* one fits in long long, the other does not */
}

static int keys_equal(const fj *a, const fj *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static int key_cmp(const fj *a, const fj *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->str, b->str, n);

    if (c != 0)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* Index of the last member of obj named like key, SIZE_MAX when none. */
static size_t last_index(const fj *obj, const fj *key)
{
    size_t i;

    for (i = obj->n; i-- > 0;)
        if (keys_equal(obj->keys[i], key))
            return i;
    return SIZE_MAX;
}

/* qsort_r order of member indexes: by key, then by position (qsort is
 * not stable). */
static int member_cmp(const void *x, const void *y, void *arg)
{
    const fj *obj = arg;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    int c = key_cmp(obj->keys[i], obj->keys[j]);

    if (c != 0)
        return c;
    return i < j ? -1 : i > j;
}

/* The members of obj as Python's dict keeps them: sorted by key, the last
 * of each duplicate key only.  Returns the count; *idx (malloc'ed) the
 * member indexes. */
static size_t dict_view(const fj *obj, size_t **idx)
{
    size_t *v = malloc(obj->n * sizeof(*v) + 1), n = 0, i;

    if (v == NULL)
        abort();
    for (i = 0; i < obj->n; i++)
        v[i] = i;
    qsort_r(v, obj->n, sizeof(*v), member_cmp, (void *)obj);
    for (i = 0; i < obj->n; i++) {
        if (i + 1 < obj->n && keys_equal(obj->keys[v[i]], obj->keys[v[i + 1]]))
            continue;  /* a later duplicate follows */
        v[n++] = v[i];
    }
    *idx = v;
    return n;
}

static int objects_equal(const fj *a, const fj *b)
{
    size_t *ia, *ib, na, nb, i;
    int eq;

    if (a->n <= 16 && b->n <= 16) {
        /* Small (the usual case): same distinct key count, and every last
         * member of a has an equal last member in b. */
        na = nb = 0;
        for (i = 0; i < a->n; i++)
            na += last_index(a, a->keys[i]) == i;
        for (i = 0; i < b->n; i++)
            nb += last_index(b, b->keys[i]) == i;
        if (na != nb)
            return 0;
        for (i = 0; i < a->n; i++) {
            size_t j;
            if (last_index(a, a->keys[i]) != i)
                continue;
            j = last_index(b, a->keys[i]);
            if (j == SIZE_MAX || !fj_equal(a->items[i], b->items[j]))
                return 0;
        }
        return 1;
    }
    na = dict_view(a, &ia);
    nb = dict_view(b, &ib);
    eq = na == nb;
    for (i = 0; eq && i < na; i++)
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
    if (a->type != b->type) {
        long long unused;
        return numkind(a, &unused) != NK_NONE && numkind(b, &unused) != NK_NONE && numbers_equal(a, b);
    }
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

void fj_insert(fj *array, size_t at, fj *item)
{
    if (array == NULL || array->type != FJ_ARRAY || item == NULL)
        return;
    if (at > array->n)
        at = array->n;  /* as list.insert */
    grow(array);
    memmove(array->items + at + 1, array->items + at, (array->n - at) * sizeof(fj *));
    array->items[at] = item;
    array->n++;
}

void fj_append(fj *array, fj *item)
{
    if (array != NULL)
        fj_insert(array, array->n, item);
}

void fj_remove(fj *c, size_t i)
{
    if (c == NULL || (c->type != FJ_ARRAY && c->type != FJ_OBJECT) || i >= c->n)
        return;
    memmove(c->items + i, c->items + i + 1, (c->n - i - 1) * sizeof(fj *));
    if (c->type == FJ_OBJECT)
        memmove(c->keys + i, c->keys + i + 1, (c->n - i - 1) * sizeof(fj *));
    c->n--;
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
