/* Which devices a container asked for, and their merged CDI edits: see
 * request.h.  The C twin of xpu_cdi.hook.select, xpu_cdi.cdi.names and
 * xpu_cdi.cdi.registry; every limit, order and tie-break below is theirs.
 * Whatever the Python code would refuse, report as a problem, or decide
 * with machinery this file does not have (a profile's alias regex, a YAML
 * parser, Unicode whitespace) is XF_DEFER. */
#include "request.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_SUFFIX ".xpu-cdi"          /* select.INDEX_SUFFIX, registry.INDEX_SUFFIX */
#define MAX_INDEX_BYTES ((size_t)1 << 20) /* select.MAX_INDEX_BYTES */
#define MAX_RANGE 4096                    /* select.MAX_RANGE */
#define MAX_TOKEN 64                      /* select.MAX_TOKEN */
#define MAX_VALUE ((size_t)1 << 16)       /* select.MAX_VALUE */
#define ANNOTATION_PREFIX "cdi.k8s.io/"   /* names.ANNOTATION_PREFIX */
#define PREFIX_LEN (sizeof(ANNOTATION_PREFIX) - 1)
#define MAX_ANNOTATION_NAME 63            /* names.MAX_ANNOTATION_NAME */
#define MAX_SPEC_BYTES ((size_t)16 << 20) /* registry.MAX_SPEC_BYTES */
#define MAX_FILES 4096                    /* registry.MAX_FILES */
#define MAX_REPR_MEMBERS 64               /* objects compared member by member in hooks */

/* ---- small helpers ------------------------------------------------------ */

/* A string-keyed hash map (open addressing); values are never NULL. */
struct map {
    const char **keys;
    void **vals;
    size_t cap, n;
};

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t map_find(const struct map *m, const char *key)
{
    size_t i = hash_str(key) & (m->cap - 1);

    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void *map_get(const struct map *m, const char *key)
{
    return m->cap == 0 ? NULL : m->vals[map_find(m, key)];
}

/* Set key to val (replacing); returns the previous value or NULL. */
static void *map_put(struct map *m, const char *key, void *val)
{
    size_t i;
    void *old;

    if ((m->n + 1) * 2 > m->cap) {
        struct map bigger = {NULL, NULL, m->cap ? m->cap * 2 : 16, 0};
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

/* A growable array of pointers. */
struct vec {
    const void **v;
    size_t n, cap;
};

static void vec_add(struct vec *a, const void *p)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = xf_realloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = p;
}

/* An ordered set of names (select.requested's dict of None). */
struct names {
    struct vec list;
    struct map seen;
};

static void names_add(struct names *s, const char *name)
{
    if (map_get(&s->seen, name) == NULL) {
        map_put(&s->seen, name, (void *)name);
        vec_add(&s->list, name);
    }
}

/* Python's str.isspace() for ASCII (str.strip() also strips \x1c-\x1f);
 * non-ASCII text never gets here. */
static int py_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static void strip(const char **s, size_t *n)
{
    while (*n > 0 && py_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && py_space((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

static int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* A decoded JSON string equal to s[0:n] (NUL bytes included). */
static int str_is(const fj *v, const char *s, size_t n)
{
    return v != NULL && v->type == FJ_STRING && v->len == n && memcmp(v->str, s, n) == 0;
}

/* os.path.join(d, name) for a plain name. */
static char *join(const char *d, const char *name)
{
    size_t n = strlen(d);

    if (n == 0 || d[n - 1] == '/')
        return xf_printf("%s%s", d, name);
    return xf_printf("%s/%s", d, name);
}

/* Python's truth value of a parsed JSON value (NULL: absent, false). */
static int truthy(const fj *v)
{
    if (v == NULL)
        return 0;
    switch (v->type) {
    case FJ_NULL:
    case FJ_FALSE:
        return 0;
    case FJ_TRUE:
        return 1;
    case FJ_NUMBER:
        /* an integer that overflows long long is never 0; a float is 0 when strtod says so, as float() */
        return v->is_int ? v->num != 0 : strtod(v->str, NULL) != 0;
    case FJ_STRING:
        return v->len > 0;
    case FJ_ARRAY:
    case FJ_OBJECT:
        return v->n > 0;
    }
    return 0;
}

/* Whether the member i of obj is the last one with its key (the one a dict keeps). */
static int last_member(const fj *obj, size_t i)
{
    for (size_t j = i + 1; j < obj->n; j++)
        if (obj->keys[j]->len == obj->keys[i]->len &&
            memcmp(obj->keys[j]->str, obj->keys[i]->str, obj->keys[i]->len) == 0)
            return 0;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* os.listdir, sorted (byte order).  0, or -errno when the dir cannot be listed. */
static int list_dir(const char *d, char ***names, size_t *n)
{
    DIR *dir = opendir(d);
    struct dirent *e;
    struct vec v = {0};

    *names = NULL;
    *n = 0;
    if (dir == NULL)
        return -errno;
    for (;;) {
        errno = 0;
        e = readdir(dir);
        if (e == NULL)
            break;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        vec_add(&v, xf_strdup(e->d_name));
    }
    if (errno != 0) {
        int err = errno;
        closedir(dir);
        return -err;
    }
    closedir(dir);
    if (v.n > 0)
        qsort(v.v, v.n, sizeof(*v.v), cmp_str);
    *names = (char **)v.v;
    *n = v.n;
    return 0;
}

/* How reading a file went, in the terms the Python callers care about. */
enum { RD_OK, RD_OSERROR, RD_DEFER };

/* Up to limit bytes of a regular file (NUL-terminated).  RD_OSERROR where
 * Python's open()/read() raise OSError (a directory too); RD_DEFER (reason
 * set) for a file larger than limit or of another type (a FIFO would block
 * Python: not ours to decide). */
static int read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct xf_buf b = {0};
    int rv = RD_OK;

    if (fd < 0)
        return RD_OSERROR;
    if (fstat(fd, st) != 0 || S_ISDIR(st->st_mode)) {
        close(fd);
        return RD_OSERROR;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        xf_say(XF_DEFER, "%s: not a regular file", path);
        return RD_DEFER;
    }
    xf_buf_add(&b, "", 0);
    for (;;) {
        char chunk[65536];
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rv = RD_OSERROR;
            break;
        }
        if (got == 0)
            break;
        if (b.len + (size_t)got > limit) {
            xf_say(XF_DEFER, "%s: larger than %zu bytes", path, limit);
            rv = RD_DEFER;
            break;
        }
        xf_buf_add(&b, chunk, (size_t)got);
    }
    close(fd);
    if (rv != RD_OK) {
        free(b.data);
        return rv;
    }
    *data = b.data;
    *len = b.len;
    return RD_OK;
}

static const fj *int_value(long long v)
{
    return fj_new_int(v);
}

/* ---- hook indexes (select.load_indexes) ---------------------------------- */

/* select._int: 1 to 6 ASCII digits. */
static int card_index(const char *s, size_t n, long *out)
{
    long v = 0;

    if (n == 0 || n > 6)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

static int string_list(const fj *v)
{
    if (v == NULL)
        return 1; /* sel.get(key, []) */
    if (v->type != FJ_ARRAY)
        return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->type != FJ_STRING)
            return 0;
    return 1;
}

/* select._usable: the shape generate writes. */
static int usable(const fj *d)
{
    const fj *sel, *indices, *all, *aliases, *kind;

    if (d->type != FJ_OBJECT || !fj_equal(fj_get(d, "xpuCdiIndex"), int_value(1)))
        return 0; /* None != 1; True and 1.0 == 1, as fj_equal knows */
    kind = fj_get(d, "kind");
    if (kind == NULL || kind->type != FJ_STRING)
        return 0;
    sel = fj_get(d, "selection");
    indices = fj_get(d, "indices");
    all = fj_get(d, "all");
    if (sel == NULL || sel->type != FJ_OBJECT || indices == NULL || indices->type != FJ_OBJECT)
        return 0;
    if (!(all == NULL || all->type == FJ_NULL || all->type == FJ_STRING))
        return 0;
    for (size_t i = 0; i < indices->n; i++) {
        long unused;
        if (!card_index(indices->keys[i]->str, indices->keys[i]->len, &unused))
            return 0;
        if (indices->items[i]->type != FJ_STRING && last_member(indices, i))
            return 0; /* an earlier duplicate's value does not count: the dict keeps the last */
    }
    if (!string_list(fj_get(sel, "env")) || !string_list(fj_get(sel, "none")))
        return 0;
    aliases = fj_get(sel, "aliases");
    return aliases == NULL || aliases->type == FJ_NULL || aliases->type == FJ_STRING;
}

static int cmp_index(const void *a, const void *b)
{
    return strcmp(((const struct xf_index *)a)->kind, ((const struct xf_index *)b)->kind);
}

int xf_load_indexes(const char *const *dirs, size_t ndirs, struct xf_indexes *out)
{
    struct map by_kind = {0};
    struct vec kinds = {0};

    out->items = NULL;
    out->n = 0;
    for (size_t di = 0; di < ndirs; di++) {
        char **names;
        size_t n;
        if (list_dir(dirs[di], &names, &n) != 0)
            continue; /* Python: OSError -> next dir */
        for (size_t i = 0; i < n; i++) {
            char *path, *data, err[256];
            size_t len;
            struct stat st;
            const fj *doc, *kind;
            if (!ends_with(names[i], INDEX_SUFFIX))
                continue;
            if (!is_ascii(names[i], strlen(names[i])))
                return xf_say(XF_DEFER, "index %s: a non-ASCII name (Python sorts by code point)", names[i]);
            path = join(dirs[di], names[i]);
            switch (read_regular(path, MAX_INDEX_BYTES, &data, &len, &st)) {
            case RD_OSERROR:
                continue; /* a broken index only disables env selection for its kind */
            case RD_DEFER:
                return XF_DEFER;
            }
            doc = fj_parse(data, len, err, sizeof(err));
            if (doc == NULL) /* Python may read what this parser refuses (NaN, deep nesting) */
                return xf_say(XF_DEFER, "index %s: %s", path, err);
            if (!usable(doc))
                continue;
            kind = fj_get(doc, "kind");
            if (fj_str(kind) == NULL)
                return xf_say(XF_DEFER, "index %s: NUL in kind", path);
            if (map_put(&by_kind, kind->str, (void *)doc) == NULL)
                vec_add(&kinds, kind->str);
        }
    }
    out->items = xf_alloc((kinds.n ? kinds.n : 1) * sizeof(*out->items));
    for (size_t i = 0; i < kinds.n; i++) {
        out->items[i].kind = kinds.v[i];
        out->items[i].json = map_get(&by_kind, kinds.v[i]);
    }
    out->n = kinds.n;
    /* kinds are UTF-8 without NUL: byte order is Python's code point order */
    if (out->n > 1)
        qsort(out->items, out->n, sizeof(*out->items), cmp_index);
    return XF_OK;
}

/* ---- selection values (select.parse_value) ------------------------------ */

struct span {
    long lo, hi;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->hi > y->hi) - (x->hi < y->hi);
}

struct card {
    long index;
    size_t pos;  /* first position of its key (the dict's order) */
    const fj *key, *name;
};

static int cmp_card_key(const void *a, const void *b)
{
    const struct card *x = a, *y = b;
    size_t n = x->key->len < y->key->len ? x->key->len : y->key->len;
    int c = memcmp(x->key->str, y->key->str, n);

    if (c != 0)
        return c;
    if (x->key->len != y->key->len)
        return x->key->len < y->key->len ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_card_index(const void *a, const void *b)
{
    const struct card *x = a, *y = b;

    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int add_name(struct names *out, const char *kind, const fj *name)
{
    if (fj_str(name) == NULL)
        return xf_say(XF_DEFER, "index of %s: a device name with NUL", kind);
    names_add(out, xf_printf("%s=%s", kind, name->str));
    return XF_OK;
}

/* `all` with no "all" device: every card, sorted(indices, key=int) --
 * a stable sort, so keys of equal value ("1", "01") keep the dict's order. */
static int all_cards(const char *kind, const fj *indices, struct names *out)
{
    size_t n = indices->n, u = 0;
    struct card *cards = xf_alloc((n ? n : 1) * sizeof(*cards));

    for (size_t i = 0; i < n; i++) {
        cards[i].pos = i;
        cards[i].key = indices->keys[i];
        cards[i].name = indices->items[i];
        card_index(cards[i].key->str, cards[i].key->len, &cards[i].index); /* usable() checked */
    }
    /* one entry per distinct key: first position, last value */
    qsort(cards, n, sizeof(*cards), cmp_card_key);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && cards[j + 1].key->len == cards[i].key->len &&
               memcmp(cards[j + 1].key->str, cards[i].key->str, cards[i].key->len) == 0)
            j++;
        cards[u] = cards[i];
        cards[u++].name = cards[j].name;
        i = j + 1;
    }
    qsort(cards, u, sizeof(*cards), cmp_card_index);
    for (size_t i = 0; i < u; i++)
        if (add_name(out, kind, cards[i].name) != XF_OK)
            return XF_DEFER;
    free(cards);
    return XF_OK;
}

static int parse_value(const char *kind, const fj *index, const char *var, const char *value, size_t vlen,
                       struct names *out)
{
    const fj *sel = fj_get(index, "selection"), *none = fj_get(sel, "none"), *indices, *all;
    const char *s = value, *p, *end;
    size_t n = vlen, nspans = 0, capspans = 0;
    struct span *spans = NULL;
    struct map by_key = {0};
    int want_all = 0;
    long done = -1;
    static const char *const default_none[] = {"", "void", "none"};

    if (!is_ascii(value, vlen))
        return xf_say(XF_DEFER, "%s: not ASCII", var); /* Unicode whitespace, aliases: Python's */
    if (vlen > MAX_VALUE)
        return xf_say(XF_DEFER, "%s: longer than %zu characters", var, MAX_VALUE);
    strip(&s, &n);
    if (none != NULL && none->n > 0) {
        for (size_t i = 0; i < none->n; i++)
            if (str_is(none->items[i], s, n))
                return XF_OK;
    } else {
        for (size_t i = 0; i < 3; i++)
            if (strlen(default_none[i]) == n && memcmp(default_none[i], s, n) == 0)
                return XF_OK;
    }
    indices = fj_get(index, "indices");
    for (p = s, end = s + n;; p++) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *tok = p, *dash;
        size_t tlen = (size_t)((comma ? comma : end) - p);
        long lo = 0, hi = 0;
        int is_all;
        strip(&tok, &tlen);
        is_all = tlen == 3 && memcmp(tok, "all", 3) == 0;
        if (is_all) {
            want_all = 1;
        } else if (card_index(tok, tlen, &lo)) {
            hi = lo;
        } else if ((dash = memchr(tok, '-', tlen)) != NULL && card_index(tok, (size_t)(dash - tok), &lo) &&
                   card_index(dash + 1, tlen - (size_t)(dash - tok) - 1, &hi)) {
            if (lo > hi || hi - lo >= MAX_RANGE)
                return xf_say(XF_DEFER, "%s: range %.*s out of bounds", var, (int)tlen, tok);
        } else {
            /* an alias (Ascend910-0) or garbage: the profile's regex, in Python */
            return xf_say(XF_DEFER, "%s: token '%.*s' is not an index, a range or all", var,
                          (int)(tlen > MAX_TOKEN ? MAX_TOKEN : tlen), tok);
        }
        if (!is_all) {
            if (nspans == capspans) {
                capspans = capspans ? capspans * 2 : 16;
                spans = xf_realloc(spans, capspans * sizeof(*spans));
            }
            spans[nspans].lo = lo;
            spans[nspans++].hi = hi;
        }
        if (comma == NULL)
            break;
        p = comma;
    }
    if (want_all) {
        free(spans);
        all = fj_get(index, "all");
        if (truthy(all))
            return add_name(out, kind, all);
        return all_cards(kind, indices, out);
    }
    for (size_t i = 0; i < indices->n; i++) /* the dict: the last value of a key */
        map_put(&by_key, xf_strndup(indices->keys[i]->str, indices->keys[i]->len), indices->items[i]);
    if (nspans > 1)
        qsort(spans, nspans, sizeof(*spans), cmp_span);
    for (size_t k = 0; k < nspans; k++) {
        for (long i = spans[k].lo > done + 1 ? spans[k].lo : done + 1; i <= spans[k].hi; i++) {
            char key[24];
            const fj *name;
            snprintf(key, sizeof(key), "%ld", i);
            name = map_get(&by_key, key);
            if (name == NULL)
                return xf_say(XF_DEFER, "%s: no card %ld in the %s index", var, i, kind);
            if (add_name(out, kind, name) != XF_OK)
                return XF_DEFER;
        }
        if (spans[k].hi > done)
            done = spans[k].hi;
    }
    free(spans);
    free(by_key.keys);
    free(by_key.vals);
    return XF_OK;
}

/* env_map(env)[var]: the last "var=..." entry's value. */
static int env_lookup(const fj *env, const char *var, size_t varlen, const char **value, size_t *vlen)
{
    for (size_t i = env ? env->n : 0; i-- > 0;) {
        const fj *e = env->items[i];
        const char *eq;
        if (e->type != FJ_STRING)
            continue;
        eq = memchr(e->str, '=', e->len);
        if (eq != NULL && (size_t)(eq - e->str) == varlen && memcmp(e->str, var, varlen) == 0) {
            *value = eq + 1;
            *vlen = e->len - varlen - 1;
            return 1;
        }
    }
    return 0;
}

/* ---- annotations (cdi.names) --------------------------------------------- */

static int is_alpha(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int is_alnum(char c)
{
    return is_alpha(c) || (c >= '0' && c <= '9');
}

/* ^FIRST([A-Za-z0-9<extra>]*[A-Za-z0-9])?\Z -- \Z: no trailing newline either. */
static int name_like(const char *s, size_t n, int first_alpha_only, const char *extra)
{
    if (n == 0 || !(first_alpha_only ? is_alpha(s[0]) : is_alnum(s[0])))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_alnum(s[i]) && (s[i] == '\0' || strchr(extra, s[i]) == NULL))
            return 0;
    return n == 1 || is_alnum(s[n - 1]);
}

/* names.parse_qualified: vendor/class=name. */
static int qualified_ok(const char *d, size_t n)
{
    const char *eq = memchr(d, '=', n), *slash;
    size_t klen;

    if (eq == NULL)
        return 0;
    klen = (size_t)(eq - d);
    slash = memchr(d, '/', klen);
    if (slash == NULL)
        return 0;
    return name_like(d, (size_t)(slash - d), 1, "_.-") &&                    /* VENDOR_RE */
           name_like(slash + 1, klen - (size_t)(slash - d) - 1, 1, "_.-") && /* CLASS_RE */
           name_like(eq + 1, n - klen - 1, 0, "_.:-");                         /* NAME_RE */
}

/* names.parse_annotation_value for a key already checked. */
static int annotation_devices(const char *key, const fj *value, struct names *out)
{
    const char *s, *p, *end;
    size_t n;

    if (fj_str(value) == NULL) /* Python takes str(value): never a device list we should guess at */
        return xf_say(XF_DEFER, "annotation %s: not a string", key);
    if (!is_ascii(value->str, value->len))
        return xf_say(XF_DEFER, "annotation %s: not ASCII", key);
    s = value->str;
    n = value->len;
    strip(&s, &n);
    if (n == 0)
        return xf_say(XF_DEFER, "annotation %s: empty value", key);
    for (p = value->str, end = value->str + value->len;; p++) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *d = p;
        size_t dlen = (size_t)((comma ? comma : end) - p);
        strip(&d, &dlen);
        if (!qualified_ok(d, dlen))
            return xf_say(XF_DEFER, "annotation %s: '%.*s' is not a qualified CDI device", key,
                          (int)(dlen > 100 ? 100 : dlen), d);
        names_add(out, xf_strndup(d, dlen));
        if (comma == NULL)
            break;
        p = comma;
    }
    return XF_OK;
}

/* The cdi.k8s.io/ members of state's then config's annotations, later
 * winning (state.container), sorted by key (devices_from_annotations). */
static int annotation_names(const fj *ann_state, const fj *ann_config, struct names *out)
{
    const fj *sources[2] = {ann_state, ann_config};
    struct map values = {0};
    struct vec keys = {0};

    for (size_t s = 0; s < 2; s++) {
        const fj *src = sources[s];
        if (src == NULL || src->type == FJ_NULL)
            continue;
        if (src->type != FJ_OBJECT)
            return xf_say(XF_DEFER, "annotations are not an object");
        for (size_t i = 0; i < src->n; i++) {
            const fj *k = src->keys[i];
            if (k->len < PREFIX_LEN || memcmp(k->str, ANNOTATION_PREFIX, PREFIX_LEN) != 0)
                continue;
            if (k->has_nul)
                return xf_say(XF_DEFER, "annotation key with NUL");
            if (map_put(&values, k->str, src->items[i]) == NULL)
                vec_add(&keys, k->str);
        }
    }
    if (keys.n > 1) /* UTF-8 byte order is code point order */
        qsort(keys.v, keys.n, sizeof(*keys.v), cmp_str);
    for (size_t i = 0; i < keys.n; i++) {
        const char *key = keys.v[i], *rest = key + PREFIX_LEN;
        size_t rlen = strlen(rest);
        /* names.annotation_key_problem; over 63 bytes is over 63 characters or not ASCII: refused either way */
        if (rlen > MAX_ANNOTATION_NAME || !name_like(rest, rlen, 0, "_.-"))
            return xf_say(XF_DEFER, "annotation key %.100s is not valid", key);
        if (annotation_devices(key, map_get(&values, key), out) != XF_OK)
            return XF_DEFER;
    }
    free(values.keys);
    free(values.vals);
    return XF_OK;
}

/* ---- select.requested ---------------------------------------------------- */

int xf_requested(const struct xf_indexes *ix, const fj *env, const fj *ann_state, const fj *ann_config,
                 const char ***names, size_t *n)
{
    struct names out = {0};

    *names = NULL;
    *n = 0;
    if (env != NULL && env->type == FJ_NULL)
        env = NULL;
    if (env != NULL && env->type != FJ_ARRAY)
        return xf_say(XF_DEFER, "process.env is not a list");
    for (size_t i = 0; env != NULL && i < env->n; i++)
        if (env->items[i]->type == FJ_STRING && env->items[i]->has_nul)
            return xf_say(XF_DEFER, "process.env: an entry with NUL");
    for (size_t k = 0; k < ix->n; k++) { /* sorted by kind */
        const fj *vars = fj_get(fj_get(ix->items[k].json, "selection"), "env");
        for (size_t i = 0; vars != NULL && vars->type == FJ_ARRAY && i < vars->n; i++) {
            const fj *var = vars->items[i];
            const char *value;
            size_t vlen;
            if (fj_str(var) == NULL || !env_lookup(env, var->str, var->len, &value, &vlen))
                continue;
            if (parse_value(ix->items[k].kind, ix->items[k].json, var->str, value, vlen, &out) != XF_OK)
                return XF_DEFER;
            break; /* the first variable of a kind that is set decides */
        }
    }
    if (annotation_names(ann_state, ann_config, &out) != XF_OK)
        return XF_DEFER;
    *names = (const char **)out.list.v;
    *n = out.list.n;
    return XF_OK;
}

/* ---- spec dirs (registry.load) ------------------------------------------- */

struct spec {
    const char *path;
    const fj *edits;  /* the spec's top-level containerEdits object, or NULL */
};

struct device {
    const struct spec *spec;
    const fj *edits;  /* the device's containerEdits */
};

/* registry._check_edits */
static int check_edits(const fj *e, const char *path)
{
    static const char *const lists[] = {"deviceNodes", "mounts", "hooks"};
    static const char *const required[][2] = {{"path", NULL}, {"hostPath", "containerPath"}, {"hookName", "path"}};
    const fj *env = fj_get(e, "env");

    if (env != NULL && env->type != FJ_NULL && !string_list(env))
        return xf_say(XF_DEFER, "spec %s: env is not a list of strings", path);
    for (size_t k = 0; k < 3; k++) {
        const fj *items = fj_get(e, lists[k]);
        if (items == NULL || items->type == FJ_NULL)
            continue;
        if (items->type != FJ_ARRAY)
            return xf_say(XF_DEFER, "spec %s: %s is not a list", path, lists[k]);
        for (size_t i = 0; i < items->n; i++) {
            const fj *item = items->items[i];
            if (item->type != FJ_OBJECT)
                return xf_say(XF_DEFER, "spec %s: an entry of %s is not an object", path, lists[k]);
            for (size_t f = 0; f < 2 && required[k][f] != NULL; f++) {
                const fj *v = fj_get(item, required[k][f]);
                if (v == NULL || v->type != FJ_STRING)
                    return xf_say(XF_DEFER, "spec %s: an entry of %s has no %s", path, lists[k], required[k][f]);
            }
        }
    }
    return XF_OK;
}

/* registry._check; *kind and *devices on success. */
static int check_spec(const fj *spec, const char *path, const fj **kind, const fj **devices)
{
    const fj *edits;
    size_t slashes = 0;

    if (spec->type != FJ_OBJECT)
        return xf_say(XF_DEFER, "spec %s: not an object", path);
    if (fj_get(spec, "cdiVersion") == NULL || fj_get(spec, "kind") == NULL || fj_get(spec, "devices") == NULL)
        return xf_say(XF_DEFER, "spec %s: a required field is missing", path);
    *kind = fj_get(spec, "kind");
    if ((*kind)->type == FJ_STRING)
        for (size_t i = 0; i < (*kind)->len; i++)
            slashes += (*kind)->str[i] == '/';
    if ((*kind)->type != FJ_STRING || slashes != 1)
        return xf_say(XF_DEFER, "spec %s: invalid kind", path);
    *devices = fj_get(spec, "devices");
    if ((*devices)->type != FJ_ARRAY || (*devices)->n == 0)
        return xf_say(XF_DEFER, "spec %s: devices is not a non-empty list", path);
    for (size_t i = 0; i < (*devices)->n; i++) {
        const fj *dev = (*devices)->items[i], *name, *ce;
        if (dev->type != FJ_OBJECT)
            return xf_say(XF_DEFER, "spec %s: a device is not an object", path);
        name = fj_get(dev, "name");
        ce = fj_get(dev, "containerEdits");
        if (name == NULL || name->type != FJ_STRING || ce == NULL || ce->type != FJ_OBJECT)
            return xf_say(XF_DEFER, "spec %s: a device without name or containerEdits", path);
        if (check_edits(ce, path) != XF_OK)
            return XF_DEFER;
    }
    edits = fj_get(spec, "containerEdits");
    if (edits != NULL && edits->type != FJ_NULL) {
        if (edits->type != FJ_OBJECT)
            return xf_say(XF_DEFER, "spec %s: containerEdits is not an object", path);
        if (check_edits(edits, path) != XF_OK)
            return XF_DEFER;
    }
    if (fj_str(*kind) == NULL)
        return xf_say(XF_DEFER, "spec %s: NUL in kind", path);
    return XF_OK;
}

/* registry._read (+ _read_index for YAML): the parsed spec, or XF_DEFER
 * for anything Python would report, or parse as YAML. */
static int read_spec(const char *path, const fj **spec)
{
    char *data, err[256];
    size_t len;
    struct stat st;
    const fj *index, *expect;
    fj *stat_pair;

    if (ends_with(path, ".yaml")) {
        struct stat ist;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), ok;
        if (fd < 0)
            return xf_say(XF_DEFER, "spec %s: cannot open: %s", path, strerror(errno));
        ok = fstat(fd, &st) == 0;
        close(fd);
        if (!ok || !S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_SPEC_BYTES)
            return xf_say(XF_DEFER, "spec %s: not a regular file of a usable size", path);
        /* never parsed here: usable only through its index's compact copy, while specStat matches */
        if (read_regular(xf_printf("%s%s", path, INDEX_SUFFIX), MAX_SPEC_BYTES, &data, &len, &ist) != RD_OK ||
            (index = fj_parse(data, len, err, sizeof(err))) == NULL || index->type != FJ_OBJECT ||
            !fj_equal(fj_get(index, "xpuCdiIndex"), int_value(1)))
            return xf_say(XF_DEFER, "spec %s: YAML without a usable index", path);
        /* st_mtime_ns in a long long: after 2262 (a clock or touch -d far off) it
         * does not fit, and the multiplication would overflow */
        if (st.st_mtim.tv_sec < LLONG_MIN / 1000000000LL + 1 || st.st_mtim.tv_sec > LLONG_MAX / 1000000000LL - 1)
            return xf_say(XF_DEFER, "spec %s: a modification time out of range", path);
        stat_pair = fj_new(FJ_ARRAY);
        fj_append(stat_pair, fj_new_int((long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec));
        fj_append(stat_pair, fj_new_int((long long)st.st_size));
        expect = fj_get(index, "specStat");
        if (expect == NULL || !fj_equal(expect, stat_pair) || fj_get(index, "compact") == NULL)
            return xf_say(XF_DEFER, "spec %s: YAML changed since its index was written", path);
        *spec = fj_get(index, "compact");
        return XF_OK;
    }
    switch (read_regular(path, MAX_SPEC_BYTES, &data, &len, &st)) {
    case RD_OSERROR:
        return xf_say(XF_DEFER, "spec %s: cannot read", path);
    case RD_DEFER:
        return XF_DEFER;
    }
    *spec = fj_parse(data, len, err, sizeof(err));
    if (*spec == NULL)
        return xf_say(XF_DEFER, "spec %s: %s", path, err);
    return XF_OK;
}

/* registry._load_dir, into all (q -> struct device), replacing earlier dirs' devices. */
static int load_dir(const char *d, struct map *all)
{
    char **names;
    size_t n;
    int rv = list_dir(d, &names, &n);
    struct map found = {0};

    if (rv == -ENOENT)
        return XF_OK;
    if (rv != 0)
        return xf_say(XF_DEFER, "spec dir %s: cannot list: %s", d, strerror(-rv));
    if (n > MAX_FILES)
        return xf_say(XF_DEFER, "spec dir %s: %zu entries", d, n);
    for (size_t i = 0; i < n; i++) {
        const fj *doc, *kind = NULL, *devices = NULL;
        struct spec *spec;
        if (!ends_with(names[i], ".json") && !ends_with(names[i], ".yaml"))
            continue;
        spec = xf_alloc(sizeof(*spec));
        spec->path = join(d, names[i]);
        if (read_spec(spec->path, &doc) != XF_OK || check_spec(doc, spec->path, &kind, &devices) != XF_OK)
            return XF_DEFER;
        spec->edits = fj_get(doc, "containerEdits");
        if (spec->edits != NULL && spec->edits->type != FJ_OBJECT)
            spec->edits = NULL;
        for (size_t j = 0; j < devices->n; j++) {
            const fj *name = fj_get(devices->items[j], "name");
            struct device *dev;
            char *q;
            if (fj_str(name) == NULL)
                return xf_say(XF_DEFER, "spec %s: NUL in a device name", spec->path);
            q = xf_printf("%s=%s", kind->str, name->str);
            dev = xf_alloc(sizeof(*dev));
            dev->spec = spec;
            dev->edits = fj_get(devices->items[j], "containerEdits");
            if (map_put(&found, q, dev) != NULL) /* Python drops both and reports it */
                return xf_say(XF_DEFER, "conflicting device %s in %s", q, d);
        }
    }
    for (size_t i = 0; i < found.cap; i++)
        if (found.keys[i] != NULL)
            map_put(all, found.keys[i], found.vals[i]);
    free(found.keys);
    free(found.vals);
    return XF_OK;
}

/* ---- registry.merge_edits ------------------------------------------------ */

/* Whether repr() of two parsed values is the same -- merge_edits keys hooks
 * by repr(sorted(h.items())): top-level members in any order, nested
 * objects in the dict's order (first occurrence of a key, last value), 1
 * and 1.0 and True all different.  1 same, 0 different, -1 cannot tell
 * cheaply (a huge object). */
static int same_repr(const fj *a, const fj *b, int top);

static int number_text_is_float(const fj *v)
{
    return strpbrk(v->str, ".eE") != NULL;
}

static int same_number(const fj *a, const fj *b)
{
    int fa = number_text_is_float(a), fb = number_text_is_float(b);

    if (fa != fb)
        return 0;
    if (fa) {
        double x = strtod(a->str, NULL), y = strtod(b->str, NULL);
        return x == y && signbit(x) == signbit(y); /* repr(0.0) != repr(-0.0) */
    }
    if (a->is_int && b->is_int)
        return a->num == b->num;
    if (a->is_int != b->is_int)
        return 0;
    return strcmp(a->str, b->str) == 0; /* JSON spells a big integer one way */
}

/* The distinct keys of obj (first position of each) into idx; the count. */
static size_t dict_keys(const fj *obj, size_t *idx)
{
    size_t n = 0;

    for (size_t i = 0; i < obj->n; i++) {
        size_t j;
        for (j = 0; j < n; j++)
            if (obj->keys[idx[j]]->len == obj->keys[i]->len &&
                memcmp(obj->keys[idx[j]]->str, obj->keys[i]->str, obj->keys[i]->len) == 0)
                break;
        if (j == n)
            idx[n++] = i;
    }
    return n;
}

/* The last value of the key at member i. */
static const fj *dict_value(const fj *obj, size_t i)
{
    for (size_t j = obj->n; j-- > i;)
        if (obj->keys[j]->len == obj->keys[i]->len && memcmp(obj->keys[j]->str, obj->keys[i]->str, obj->keys[i]->len) == 0)
            return obj->items[j];
    return obj->items[i];
}

static int same_object(const fj *a, const fj *b, int top)
{
    size_t ia[MAX_REPR_MEMBERS], ib[MAX_REPR_MEMBERS], na, nb;

    if (a->n > MAX_REPR_MEMBERS || b->n > MAX_REPR_MEMBERS)
        return -1;
    na = dict_keys(a, ia);
    nb = dict_keys(b, ib);
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++) {
        const fj *ka = a->keys[ia[i]];
        size_t j = i;
        int r;
        if (top) { /* sorted(items): find the same key anywhere in b */
            for (j = 0; j < nb; j++)
                if (b->keys[ib[j]]->len == ka->len && memcmp(b->keys[ib[j]]->str, ka->str, ka->len) == 0)
                    break;
            if (j == nb)
                return 0;
        } else if (b->keys[ib[j]]->len != ka->len || memcmp(b->keys[ib[j]]->str, ka->str, ka->len) != 0) {
            return 0;
        }
        r = same_repr(dict_value(a, ia[i]), dict_value(b, ib[j]), 0);
        if (r != 1)
            return r;
    }
    return 1;
}

static int same_repr(const fj *a, const fj *b, int top)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case FJ_NULL:
    case FJ_FALSE:
    case FJ_TRUE:
        return 1;
    case FJ_NUMBER:
        return same_number(a, b);
    case FJ_STRING:
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case FJ_ARRAY:
        if (a->n != b->n)
            return 0;
        for (size_t i = 0; i < a->n; i++) {
            int r = same_repr(a->items[i], b->items[i], 0);
            if (r != 1)
                return r;
        }
        return 1;
    case FJ_OBJECT:
        return same_object(a, b, top);
    }
    return 0;
}

/* An optional string field: NULL when absent; XF_DEFER when of another
 * type or empty (the Python consumers read null, "" and absent
 * differently from each other: `or` in one place, a key test in another). */
static int opt_str(const fj *obj, const char *key, const char **out)
{
    const fj *v = fj_get(obj, key);

    *out = NULL;
    if (v == NULL)
        return XF_OK;
    if (fj_str(v) == NULL || v->len == 0)
        return xf_say(XF_DEFER, "%s: not a usable string", key);
    *out = v->str;
    return XF_OK;
}

static int opt_int(const fj *obj, const char *key, long long *out, unsigned bit, unsigned *present)
{
    const fj *v = fj_get(obj, key);

    if (v == NULL)
        return XF_OK;
    if (v->type != FJ_NUMBER || !v->is_int)
        return xf_say(XF_DEFER, "%s: not an integer", key);
    *out = v->num;
    *present |= bit;
    return XF_OK;
}

static int opt_strings(const fj *obj, const char *key, const char ***out, size_t *n)
{
    const fj *v = fj_get(obj, key);

    *out = NULL;
    *n = 0;
    if (v == NULL)
        return XF_OK;
    if (v->type != FJ_ARRAY)
        return xf_say(XF_DEFER, "%s: not a list", key);
    *out = xf_alloc((v->n ? v->n : 1) * sizeof(**out));
    for (size_t i = 0; i < v->n; i++) {
        if (fj_str(v->items[i]) == NULL)
            return xf_say(XF_DEFER, "%s: not a list of strings", key);
        (*out)[i] = v->items[i]->str;
    }
    *n = v->n;
    return XF_OK;
}

static int fill_node(const fj *j, struct xf_node *n)
{
    const char *type;

    memset(n, 0, sizeof(*n));
    n->json = j;
    n->path = fj_str(fj_get(j, "path"));
    if (n->path == NULL)
        return xf_say(XF_DEFER, "deviceNodes: NUL in a path");
    if (opt_str(j, "hostPath", &n->host_path) != XF_OK || opt_str(j, "type", &type) != XF_OK ||
        opt_str(j, "permissions", &n->permissions) != XF_OK ||
        opt_int(j, "major", &n->major, XF_HAS_MAJOR, &n->present) != XF_OK ||
        opt_int(j, "minor", &n->minor, XF_HAS_MINOR, &n->present) != XF_OK ||
        opt_int(j, "fileMode", &n->mode, XF_HAS_MODE, &n->present) != XF_OK ||
        opt_int(j, "uid", &n->uid, XF_HAS_UID, &n->present) != XF_OK ||
        opt_int(j, "gid", &n->gid, XF_HAS_GID, &n->present) != XF_OK)
        return xf_say(XF_DEFER, "device node %.200s: %s", n->path, xf_strdup(xf_reason));
    if (type != NULL) {
        if (strlen(type) != 1 || strchr("cbup", type[0]) == NULL)
            return xf_say(XF_DEFER, "device node %.200s: type %.20s", n->path, type);
        n->type = type[0];
    }
    return XF_OK;
}

static int fill_mount(const fj *j, struct xf_mount *m)
{
    memset(m, 0, sizeof(*m));
    m->json = j;
    m->host_path = fj_str(fj_get(j, "hostPath"));
    m->container_path = fj_str(fj_get(j, "containerPath"));
    if (m->host_path == NULL || m->container_path == NULL)
        return xf_say(XF_DEFER, "mounts: NUL in a path");
    if (opt_str(j, "type", &m->type) != XF_OK || opt_strings(j, "options", &m->options, &m->noptions) != XF_OK)
        return xf_say(XF_DEFER, "mount %.200s: %s", m->container_path, xf_strdup(xf_reason));
    return XF_OK;
}

static int fill_hook(const fj *j, struct xf_hook *h)
{
    memset(h, 0, sizeof(*h));
    h->json = j;
    h->hook_name = fj_str(fj_get(j, "hookName"));
    h->path = fj_str(fj_get(j, "path"));
    if (h->hook_name == NULL || h->path == NULL)
        return xf_say(XF_DEFER, "hooks: NUL in hookName or path");
    if (opt_strings(j, "args", &h->args, &h->nargs) != XF_OK)
        return xf_say(XF_DEFER, "hook %.200s: %s", h->path, xf_strdup(xf_reason));
    return XF_OK;
}

struct merge {
    struct vec env, nodes, mounts, hooks;  /* const fj * entries */
    struct map node_paths, mount_targets;
};

static const fj *list_of(const fj *edits, const char *key)
{
    const fj *v = fj_get(edits, key);

    return v != NULL && v->type == FJ_ARRAY ? v : NULL; /* check_edits: else absent or null */
}

/* merge_edits.add */
static int add_edits(struct merge *m, const fj *edits)
{
    const fj *l;

    if ((l = list_of(edits, "env")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            if (fj_str(l->items[i]) == NULL)
                return xf_say(XF_DEFER, "env: an entry with NUL");
            vec_add(&m->env, l->items[i]);
        }
    if ((l = list_of(edits, "deviceNodes")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            const char *path = fj_str(fj_get(l->items[i], "path"));
            if (path == NULL)
                return xf_say(XF_DEFER, "deviceNodes: NUL in a path");
            if (map_get(&m->node_paths, path) == NULL) {
                map_put(&m->node_paths, path, (void *)path);
                vec_add(&m->nodes, l->items[i]);
            }
        }
    if ((l = list_of(edits, "mounts")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            const char *target = fj_str(fj_get(l->items[i], "containerPath"));
            if (target == NULL)
                return xf_say(XF_DEFER, "mounts: NUL in a containerPath");
            if (map_get(&m->mount_targets, target) == NULL) {
                map_put(&m->mount_targets, target, (void *)target);
                vec_add(&m->mounts, l->items[i]);
            }
        }
    if ((l = list_of(edits, "hooks")) != NULL)
        for (size_t i = 0; i < l->n; i++) {
            int dup = 0;
            for (size_t k = 0; k < m->hooks.n && !dup; k++) {
                int r = same_repr(m->hooks.v[k], l->items[i], 1);
                if (r < 0)
                    return xf_say(XF_DEFER, "hooks: too large to compare");
                dup = r;
            }
            if (!dup)
                vec_add(&m->hooks, l->items[i]);
        }
    return XF_OK;
}

/* wrapper._extra_edits: additionalGids, and the first edit the wrapper cannot apply. */
static int extra_edits(const struct device *const *devs, size_t n, struct xf_edits *out)
{
    static const char *const unsupported[] = {"intelRdt", "netDevices"};
    size_t cap = 0;

    for (size_t d = 0; d < n; d++) {
        const fj *sources[2] = {devs[d]->spec->edits, devs[d]->edits};
        for (size_t s = 0; s < 2; s++) {
            const fj *gids;
            if (sources[s] == NULL)
                continue;
            for (size_t k = 0; k < 2; k++)
                if (truthy(fj_get(sources[s], unsupported[k]))) {
                    out->unsupported = unsupported[k];
                    return XF_OK; /* Python stops here */
                }
            gids = fj_get(sources[s], "additionalGids");
            if (!truthy(gids))
                continue;
            if (gids->type != FJ_ARRAY)
                return xf_say(XF_DEFER, "additionalGids is not a list");
            for (size_t i = 0; i < gids->n; i++) {
                const fj *g = gids->items[i];
                size_t j;
                if (g->type != FJ_NUMBER || !g->is_int)
                    return xf_say(XF_DEFER, "additionalGids: not an integer");
                for (j = 0; j < out->ngids && out->gids[j] != g->num; j++)
                    ;
                if (j < out->ngids)
                    continue;
                if (out->ngids == cap) {
                    cap = cap ? cap * 2 : 8;
                    out->gids = xf_realloc(out->gids, cap * sizeof(*out->gids));
                }
                out->gids[out->ngids++] = g->num;
            }
        }
    }
    return XF_OK;
}

int xf_resolve(const char *const *dirs, size_t ndirs, const char *const *names, size_t n, struct xf_edits *out)
{
    struct map all = {0}, seen_specs = {0};
    const struct device **devs = xf_alloc((n ? n : 1) * sizeof(*devs));
    struct merge m = {0};

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < ndirs; i++) /* lowest priority first: later dirs replace devices */
        if (load_dir(dirs[i], &all) != XF_OK)
            return XF_DEFER;
    for (size_t i = 0; i < n; i++) {
        devs[i] = map_get(&all, names[i]);
        if (devs[i] == NULL)
            return xf_say(XF_DEFER, "unresolvable CDI device %.200s", names[i]);
    }
    for (size_t i = 0; i < n; i++) {
        /* each spec's shared edits once, before the first of its devices' own; a spec is its file */
        if (map_get(&seen_specs, devs[i]->spec->path) == NULL) {
            map_put(&seen_specs, devs[i]->spec->path, (void *)devs[i]->spec);
            if (devs[i]->spec->edits != NULL && add_edits(&m, devs[i]->spec->edits) != XF_OK)
                return XF_DEFER;
        }
        if (add_edits(&m, devs[i]->edits) != XF_OK)
            return XF_DEFER;
    }
    out->env = xf_alloc((m.env.n ? m.env.n : 1) * sizeof(*out->env));
    for (size_t i = 0; i < m.env.n; i++)
        out->env[i] = ((const fj *)m.env.v[i])->str;
    out->nenv = m.env.n;
    out->nodes = xf_alloc((m.nodes.n ? m.nodes.n : 1) * sizeof(*out->nodes));
    for (size_t i = 0; i < m.nodes.n; i++)
        if (fill_node(m.nodes.v[i], &out->nodes[i]) != XF_OK)
            return XF_DEFER;
    out->nnodes = m.nodes.n;
    out->mounts = xf_alloc((m.mounts.n ? m.mounts.n : 1) * sizeof(*out->mounts));
    for (size_t i = 0; i < m.mounts.n; i++)
        if (fill_mount(m.mounts.v[i], &out->mounts[i]) != XF_OK)
            return XF_DEFER;
    out->nmounts = m.mounts.n;
    out->hooks = xf_alloc((m.hooks.n ? m.hooks.n : 1) * sizeof(*out->hooks));
    for (size_t i = 0; i < m.hooks.n; i++)
        if (fill_hook(m.hooks.v[i], &out->hooks[i]) != XF_OK)
            return XF_DEFER;
    out->nhooks = m.hooks.n;
    return extra_edits(devs, n, out);
}
