/* JSON text into the binaries' tree (json.h), by yajl's event parser, the
 * tree built in one pass from an arena (tree_build.h).  Why yajl and what
 * we refuse on top of its grammar check: docs/architecture.md, "Parsers".
 * In short: yajl hands over a number's text (config.json's uint64 values
 * survive), and its events let us refuse duplicate keys, deep nesting and
 * out-of-range numbers while building; it lets lone surrogate escapes and
 * non-RFC 3629 UTF-8 through, so json_text.c checks those. */
#include "lib/json.h"
#include "lib/tree_build.h"
#include "lib/json_text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* ---- parser --------------------------------------------------------- */

struct frame {
    size_t base;  /* where its members start on the member stack */
    int object;
};

struct parser {
    const char *text;
    size_t len;
    yajl_handle h;
    struct xf_arena arena;
    fj **stack;  /* members of the open containers, keys and values alternating in objects */
    size_t nstack, capstack;
    struct frame frames[FJ_MAX_DEPTH];
    int depth;
    fj *root;
    size_t root_end;      /* bytes yajl had consumed when the root value was complete */
    int completing;       /* in yajl_complete_parse: a number at the very end */
    const char *why;      /* our reason to stop the parse (yajl says "client cancelled") */
    char whybuf[200];
};

static int stop(struct parser *p, const char *why)
{
    p->why = why;
    return 0;  /* yajl: cancel the parse */
}

static void push(struct parser *p, fj *v)
{
    if (p->nstack == p->capstack) {
        p->capstack = p->capstack ? 2 * p->capstack : 64;
        p->stack = xf_realloc(p->stack, p->capstack * sizeof(*p->stack));
    }
    p->stack[p->nstack++] = v;
}

static int add(struct parser *p, fj *v)
{
    if (p->depth == 0) {
        p->root = v;
        p->root_end = p->completing ? p->len : yajl_get_bytes_consumed(p->h);
    } else
        push(p, v);
    return 1;
}

static fj *node(struct parser *p, enum fj_type type)
{
    fj *v = xf_arena_get(&p->arena, sizeof(*v));
    v->type = type;
    return v;
}

static int on_null(void *ctx)
{
    struct parser *p = ctx;
    return add(p, node(p, FJ_NULL));
}

static int on_boolean(void *ctx, int b)
{
    struct parser *p = ctx;
    return add(p, node(p, b ? FJ_TRUE : FJ_FALSE));
}

/* A number's text as yajl checked it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
static int on_number(void *ctx, const char *s, size_t n)
{
    struct parser *p = ctx;
    fj *v = node(p, FJ_NUMBER);

    v->str = xf_arena_text(&p->arena, s, n);
    v->len = n;
    if (memchr(s, '.', n) == NULL && memchr(s, 'e', n) == NULL && memchr(s, 'E', n) == NULL) {
        /* long long when it fits; an unsigned 64-bit value (config.json's
         * RLIM_INFINITY) stays a number known by its text */
        unsigned long long u;
        char *end;
        errno = 0;
        u = strtoull(v->str + (s[0] == '-'), &end, 10);
        if (errno == ERANGE || (s[0] == '-' && u > (unsigned long long)LLONG_MAX + 1))
            return stop(p, "an integer out of the 64-bit range");
        if (s[0] == '-') {
            v->is_int = 1;
            v->num = u == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)u;
        } else if (u <= (unsigned long long)LLONG_MAX) {
            v->is_int = 1;
            v->num = (long long)u;
        }
    } else if (isinf(strtod(v->str, NULL))) {
        return stop(p, "a number out of the range of a double");
    }
    return add(p, v);
}

static fj *text_node(struct parser *p, const unsigned char *s, size_t n)
{
    fj *v;

    if (!utf8_valid(s, n)) {
        stop(p, "invalid UTF-8 in a string");
        return NULL;
    }
    v = node(p, FJ_STRING);
    v->str = xf_arena_text(&p->arena, (const char *)s, n);
    v->len = n;
    v->has_nul = memchr(s, '\0', n) != NULL;
    return v;
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
    struct parser *p = ctx;
    fj *v = text_node(p, s, n);
    return v != NULL && add(p, v);
}

/* "duplicate key "<key>"": the key cut short, control characters as '?'
 * (the message is one line). */
void fj_dup_message(const fj *key, char *buf, size_t size)
{
    char shown[81];
    size_t n = key->len < 80 ? key->len : 80;

    for (size_t i = 0; i < n; i++)
        shown[i] = (unsigned char)key->str[i] < 0x20 || key->str[i] == 0x7f ? '?' : key->str[i];
    shown[n] = '\0';
    snprintf(buf, size, "duplicate key \"%s%s\"", shown, key->len > 80 ? "..." : "");
}

static int dup_key(struct parser *p, const fj *key)
{
    fj_dup_message(key, p->whybuf, sizeof(p->whybuf));
    return stop(p, p->whybuf);
}

static int on_map_key(void *ctx, const unsigned char *s, size_t n)
{
    struct parser *p = ctx;
    const struct frame *f = &p->frames[p->depth - 1];
    fj *key = text_node(p, s, n);

    if (key == NULL)
        return 0;
    if ((p->nstack - f->base) / 2 < XF_LINEAR_KEYS && xf_key_among(p->stack, f->base, p->nstack, key))
        return dup_key(p, key);
    push(p, key);
    return 1;
}

static int open_container(struct parser *p, int object)
{
    if (p->depth >= FJ_MAX_DEPTH) {
        snprintf(p->whybuf, sizeof(p->whybuf), "nested deeper than %d levels", FJ_MAX_DEPTH);
        return stop(p, p->whybuf);
    }
    p->frames[p->depth].base = p->nstack;
    p->frames[p->depth].object = object;
    p->depth++;
    return 1;
}

static int on_start_map(void *ctx)
{
    return open_container(ctx, 1);
}

static int on_start_array(void *ctx)
{
    return open_container(ctx, 0);
}

/* The container the frame opened, its members moved into it. */
static int close_container(struct parser *p, enum fj_type type)
{
    const struct frame *f = &p->frames[--p->depth];
    fj *v = node(p, type);
    const fj *twice;

    xf_take_members(&p->arena, v, p->stack, f->base, p->nstack);
    p->nstack = f->base;
    if (v->n > XF_LINEAR_KEYS && (twice = xf_repeated_key(v)) != NULL)
        return dup_key(p, twice);
    return add(p, v);
}

static int on_end_map(void *ctx)
{
    return close_container(ctx, FJ_OBJECT);
}

static int on_end_array(void *ctx)
{
    return close_container(ctx, FJ_ARRAY);
}

static const yajl_callbacks callbacks = {
    on_null, on_boolean, NULL, NULL, on_number, on_string, on_start_map, on_map_key, on_end_map,
    on_start_array, on_end_array,
};

/* One line for err: what is wrong and where ("... at line L, column C (byte B)"). */
static void describe(struct parser *p, yajl_status st, size_t at, char *err, size_t errlen)
{
    size_t line, column;
    char what[256];

    if (st == yajl_status_client_canceled && p->why != NULL) {
        snprintf(what, sizeof(what), "%s", p->why);
    } else {
        /* yajl's own words, without its "lexical error: "/"parse error: " and newline */
        unsigned char *msg = yajl_get_error(p->h, 0, NULL, 0);
        const char *m = msg != NULL ? (const char *)msg : "invalid JSON", *colon = strstr(m, "error: ");
        size_t n;
        if (colon != NULL)
            m = colon + 7;
        n = strcspn(m, "\n");
        while (n > 0 && (m[n - 1] == '.' || m[n - 1] == ' '))
            n--;
        snprintf(what, sizeof(what), "%.*s", (int)n, m);
        if (msg != NULL)
            yajl_free_error(p->h, msg);
    }
    if (at > p->len)
        at = p->len;
    fj_position(p->text, at, &line, &column);
    snprintf(err, errlen, "%s at line %zu, column %zu (byte %zu)", what, line, column, at);
}

static size_t skip_ws(const char *text, size_t at, size_t len)
{
    while (at < len && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r'))
        at++;
    return at;
}

fj *fj_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser *p = xf_alloc(sizeof(*p));
    yajl_status st;
    fj *root = NULL;
    char dummy[1];
    size_t at;

    if (err == NULL || errlen == 0) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    if (len > FJ_MAX_BYTES) {
        snprintf(err, errlen, "%zu bytes, more than the %zu a document may have", len, (size_t)FJ_MAX_BYTES);
        free(p);
        return NULL;
    }
    p->text = text;
    p->len = len;
    /* One chunk holds a typical document's nodes and text. */
    p->arena.next = len < ((size_t)10 << 20) ? 6 * len + 4096 : (size_t)64 << 20;
    if ((at = bad_whitespace(text, len)) != SIZE_MAX) {
        size_t line, column;
        fj_position(text, at, &line, &column);
        snprintf(err, errlen, "a form feed or vertical tab, which JSON does not allow, at line %zu, column %zu "
                 "(byte %zu)", line, column, at);
        free(p);
        return NULL;
    }
    if ((at = lone_surrogate(text, len)) != SIZE_MAX) {
        size_t line, column;
        fj_position(text, at, &line, &column);
        snprintf(err, errlen, "a \\u escape of a lone surrogate at line %zu, column %zu (byte %zu)", line, column, at);
        free(p);
        return NULL;
    }
    p->h = yajl_alloc(&callbacks, NULL, p);
    if (p->h == NULL)
        abort();
    /* yajl's defaults are what we want: no comments, UTF-8 checked, one
     * value, no trailing garbage, no partial document */
    st = yajl_parse(p->h, (const unsigned char *)text, len);
    if (st != yajl_status_ok)
        describe(p, st, yajl_get_bytes_consumed(p->h), err, errlen);
    else if ((p->completing = 1, st = yajl_complete_parse(p->h)) != yajl_status_ok)
        describe(p, st, len, err, errlen);  /* the end came too soon */
    else if ((at = skip_ws(text, p->root_end, len)) < len) {
        /* yajl misses an unfinished token after the value (`null "`) */
        p->why = "trailing garbage";
        describe(p, yajl_status_client_canceled, at, err, errlen);
    } else
        root = p->root;
    yajl_free(p->h);
    free(p->stack);
    free(p);
    return root;
}
