/* The JSON tree of the front end: see fjson.h.
 *
 * The parser is a recursive descent over a byte range (the text need not
 * be NUL-terminated and may contain NUL bytes), depth limited by
 * FJ_MAX_DEPTH so hostile nesting cannot exhaust the stack.  Everything it
 * builds comes from one bump arena per document: nodes, member arrays and
 * decoded text, a handful of allocations even for a large config.json.
 *
 * Where Python's json.loads (the reference, through hook/jsonload.py)
 * would accept something we refuse, refusing is safe: the caller defers to
 * Python.  We refuse more than RFC 8259 in three places: \u escapes of
 * lone surrogates, nesting deeper than FJ_MAX_DEPTH, and integers of more
 * than FJ_MAX_INT_DIGITS digits (Python may refuse those itself, depending
 * on sys.set_int_max_str_digits, whose lowest setting is 640). */
#include "fjson.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FJ_MAX_INT_DIGITS 640

/* ---- arena ---------------------------------------------------------- */

struct arena {
    char *p;      /* free space of the current chunk */
    size_t left;  /* bytes of it */
    size_t next;  /* size of the next chunk */
};

static void *arena_get(struct arena *a, size_t n)
{
    void *r;

    n = (n + 7) & ~(size_t)7;  /* keeps every node and pointer array aligned */
    if (n > a->left) {
        size_t size = a->next;
        if (size < n)
            size = n;
        a->p = xf_alloc(size);  /* zeroed: nodes start out all-zero */
        a->left = size;
        if (a->next < ((size_t)64 << 20))
            a->next *= 2;
    }
    r = a->p;
    a->p += n;
    a->left -= n;
    return r;
}

/* ---- character classes ---------------------------------------------- */

/* In a string: 0 copied as is, 1 '"', 2 '\\', 3 a control character
 * (invalid), 4 the first byte of a UTF-8 sequence or an invalid byte. */
static const unsigned char str_class[256] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

/* Whether any of the 8 bytes at s is special in a string: '"', '\\', a
 * control character or non-ASCII (word-at-a-time: most string bytes are
 * plain ASCII, and this is the parser's inner loop). */
static int special8(const unsigned char *s)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t x, q, b;

    memcpy(&x, s, 8);
    q = x ^ (ones * '"');
    b = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & highs ? 1 : 0;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, const unsigned char *end)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t n, i;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;       /* overlong below */
        else if (c == 0xED)
            hi = 0x9F;       /* U+D800..U+DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;       /* overlong below */
        else if (c == 0xF4)
            hi = 0x8F;       /* above U+10FFFF */
    } else
        return 0;
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* ---- parser --------------------------------------------------------- */

struct parser {
    const unsigned char *start, *s, *end;
    struct arena arena;
    fj **stack;               /* members of the containers being parsed */
    size_t nstack, capstack;
    char *err;
    size_t errlen;
    int failed;
};

static fj *fail(struct parser *p, const unsigned char *at, const char *what)
{
    if (!p->failed && p->err != NULL && p->errlen > 0)
        snprintf(p->err, p->errlen, "%s at byte %zu", what, (size_t)(at - p->start));
    p->failed = 1;
    return NULL;
}

static fj *node(struct parser *p, enum fj_type type)
{
    fj *v = arena_get(&p->arena, sizeof(*v));
    v->type = type;
    return v;
}

static void skip_ws(struct parser *p)
{
    while (p->s < p->end && is_ws(*p->s))
        p->s++;
}

static void push(struct parser *p, fj *v)
{
    if (p->nstack == p->capstack) {
        p->capstack = p->capstack ? 2 * p->capstack : 64;
        p->stack = xf_realloc(p->stack, p->capstack * sizeof(*p->stack));
    }
    p->stack[p->nstack++] = v;
}

static void put_utf8(char **o, unsigned long cp)
{
    unsigned char *d = (unsigned char *)*o;

    if (cp < 0x80)
        *d++ = (unsigned char)cp;
    else if (cp < 0x800) {
        *d++ = (unsigned char)(0xC0 | (cp >> 6));
        *d++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *d++ = (unsigned char)(0xE0 | (cp >> 12));
        *d++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *d++ = (unsigned char)(0xF0 | (cp >> 18));
        *d++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *d++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *d++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    *o = (char *)d;
}

/* The 4 hex digits at s (already checked by the first pass). */
static unsigned hex4(const unsigned char *s)
{
    return (unsigned)(hexval(s[0]) << 12 | hexval(s[1]) << 8 | hexval(s[2]) << 4 | hexval(s[3]));
}

/* Decode the escapes of a validated string body [s, e) into out (which has
 * room: every escape is longer than what it decodes to). */
static fj *decode_escapes(struct parser *p, fj *v, const unsigned char *s, const unsigned char *e, char *out)
{
    char *o = out;

    while (s < e) {
        const unsigned char *bs = memchr(s, '\\', (size_t)(e - s));
        if (bs == NULL)
            bs = e;
        memcpy(o, s, (size_t)(bs - s));
        o += bs - s;
        s = bs;
        if (s == e)
            break;
        switch (s[1]) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        default: {  /* 'u' */
            unsigned long cp = hex4(s + 2);
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(p, s, "lone low surrogate escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (e - s < 12 || s[6] != '\\' || s[7] != 'u')
                    return fail(p, s, "lone high surrogate escape");
                lo = hex4(s + 8);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, s, "lone high surrogate escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            } else if (cp == 0)
                v->has_nul = 1;
            put_utf8(&o, cp);
            s += 4;
        }
        }
        s += 2;
    }
    *o = '\0';
    v->len = (size_t)(o - out);
    return v;
}

static fj *parse_string(struct parser *p)
{
    const unsigned char *q = p->s, *body = q + 1, *s = body, *end = p->end;
    int escapes = 0;
    char *out;
    fj *v;

    /* First pass: find the closing quote, checking UTF-8 and escape syntax. */
    for (;;) {
        while (end - s >= 8 && !special8(s))
            s += 8;
        while (s < end && str_class[*s] == 0)
            s++;
        if (s == end)
            return fail(p, q, "unterminated string");
        switch (str_class[*s]) {
        case 1:
            goto closed;
        case 2:
            escapes = 1;
            if (end - s < 2)
                return fail(p, q, "unterminated string");
            if (s[1] == 'u') {
                if (end - s < 6 || hexval(s[2]) < 0 || hexval(s[3]) < 0 || hexval(s[4]) < 0 || hexval(s[5]) < 0)
                    return fail(p, s, "invalid \\u escape");
                s += 6;
            } else if (strchr("\"\\/bfnrt", s[1]) != NULL && s[1] != '\0') {
                s += 2;
            } else
                return fail(p, s, "invalid escape");
            break;
        case 3:
            return fail(p, s, "control character in string");
        default: {
            size_t n = utf8_len(s, end);
            if (n == 0)
                return fail(p, s, "invalid UTF-8");
            s += n;
        }
        }
    }
closed:
    v = node(p, FJ_STRING);
    v->raw = (const char *)q;
    v->rawlen = (size_t)(s + 1 - q);
    out = arena_get(&p->arena, (size_t)(s - body) + 1);
    v->str = out;
    p->s = s + 1;
    if (!escapes) {
        memcpy(out, body, (size_t)(s - body));
        out[s - body] = '\0';
        v->len = (size_t)(s - body);
        return v;
    }
    return decode_escapes(p, v, body, s, out);
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static fj *parse_number(struct parser *p)
{
    const unsigned char *start = p->s, *s = p->s, *end = p->end, *digits;
    unsigned long long u = 0;
    int neg = 0, overflow = 0, integer = 1;
    char *text;
    fj *v;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    digits = s;
    if (s == end || !is_digit(*s))
        return fail(p, start, "invalid number");
    if (*s == '0')
        s++;
    else
        while (s < end && is_digit(*s)) {
            unsigned d = (unsigned)(*s - '0');
            if (u > (ULLONG_MAX - d) / 10)
                overflow = 1;
            else
                u = u * 10 + d;
            s++;
        }
    if (s < end && *s == '.') {
        integer = 0;
        s++;
        if (s == end || !is_digit(*s))
            return fail(p, start, "invalid number");
        while (s < end && is_digit(*s))
            s++;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        integer = 0;
        s++;
        if (s < end && (*s == '+' || *s == '-'))
            s++;
        if (s == end || !is_digit(*s))
            return fail(p, start, "invalid number");
        while (s < end && is_digit(*s))
            s++;
    }
    if (integer && s - digits > FJ_MAX_INT_DIGITS)
        return fail(p, start, "integer with too many digits");
    v = node(p, FJ_NUMBER);
    v->raw = (const char *)start;
    v->rawlen = (size_t)(s - start);
    text = arena_get(&p->arena, v->rawlen + 1);
    memcpy(text, start, v->rawlen);
    text[v->rawlen] = '\0';
    v->str = text;
    v->len = v->rawlen;
    if (integer && !overflow) {
        if (!neg && u <= (unsigned long long)LLONG_MAX) {
            v->is_int = 1;
            v->num = (long long)u;
        } else if (neg && u <= (unsigned long long)LLONG_MAX + 1) {
            v->is_int = 1;
            v->num = u == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)u;
        }
    }
    p->s = s;
    return v;
}

static fj *parse_literal(struct parser *p, const char *word, size_t n, enum fj_type type)
{
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
        return fail(p, p->s, "invalid literal");
    p->s += n;
    return node(p, type);
}

static fj *parse_value(struct parser *p, int depth);

/* Move the members pushed since *base* into v's own arrays. */
static void collect(struct parser *p, fj *v, size_t base, int object)
{
    size_t n = p->nstack - base, i;

    if (object) {
        n /= 2;
        v->keys = arena_get(&p->arena, n * sizeof(fj *));
        v->items = arena_get(&p->arena, n * sizeof(fj *));
        for (i = 0; i < n; i++) {
            v->keys[i] = p->stack[base + 2 * i];
            v->items[i] = p->stack[base + 2 * i + 1];
        }
    } else {
        v->items = arena_get(&p->arena, n * sizeof(fj *));
        memcpy(v->items, p->stack + base, n * sizeof(fj *));
    }
    v->n = v->cap = n;
    p->nstack = base;
}

static fj *parse_array(struct parser *p, int depth)
{
    const unsigned char *open = p->s;
    size_t base = p->nstack;
    fj *v;

    if (depth >= FJ_MAX_DEPTH)
        return fail(p, open, "nested too deep");
    p->s++;
    skip_ws(p);
    if (p->s < p->end && *p->s == ']') {
        p->s++;
        return node(p, FJ_ARRAY);
    }
    for (;;) {
        fj *item = parse_value(p, depth + 1);
        if (item == NULL)
            return NULL;
        push(p, item);
        skip_ws(p);
        if (p->s == p->end)
            return fail(p, open, "unterminated array");
        if (*p->s == ']')
            break;
        if (*p->s != ',')
            return fail(p, p->s, "expected ',' or ']'");
        p->s++;
        skip_ws(p);
    }
    p->s++;
    v = node(p, FJ_ARRAY);
    collect(p, v, base, 0);
    return v;
}

static fj *parse_object(struct parser *p, int depth)
{
    const unsigned char *open = p->s;
    size_t base = p->nstack;
    fj *v;

    if (depth >= FJ_MAX_DEPTH)
        return fail(p, open, "nested too deep");
    p->s++;
    skip_ws(p);
    if (p->s < p->end && *p->s == '}') {
        p->s++;
        return node(p, FJ_OBJECT);
    }
    for (;;) {
        fj *key, *item;
        if (p->s == p->end || *p->s != '"')
            return fail(p, p->s, "expected a string key");
        key = parse_string(p);
        if (key == NULL)
            return NULL;
        skip_ws(p);
        if (p->s == p->end || *p->s != ':')
            return fail(p, p->s, "expected ':'");
        p->s++;
        skip_ws(p);
        item = parse_value(p, depth + 1);
        if (item == NULL)
            return NULL;
        push(p, key);
        push(p, item);
        skip_ws(p);
        if (p->s == p->end)
            return fail(p, open, "unterminated object");
        if (*p->s == '}')
            break;
        if (*p->s != ',')
            return fail(p, p->s, "expected ',' or '}'");
        p->s++;
        skip_ws(p);
    }
    p->s++;
    v = node(p, FJ_OBJECT);
    collect(p, v, base, 1);
    return v;
}

/* A value at p->s (whitespace before it already skipped); depth counts
 * the containers around it. */
static fj *parse_value(struct parser *p, int depth)
{
    if (p->s == p->end)
        return fail(p, p->s, "expected a value");
    switch (*p->s) {
    case '"':
        return parse_string(p);
    case '{':
        return parse_object(p, depth);
    case '[':
        return parse_array(p, depth);
    case 't':
        return parse_literal(p, "true", 4, FJ_TRUE);
    case 'f':
        return parse_literal(p, "false", 5, FJ_FALSE);
    case 'n':
        return parse_literal(p, "null", 4, FJ_NULL);
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return parse_number(p);
    default:
        return fail(p, p->s, "expected a value");
    }
}

fj *fj_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser p = {0};
    fj *v;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    p.start = p.s = (const unsigned char *)text;
    p.end = p.s + len;
    p.err = err;
    p.errlen = errlen;
    /* One chunk holds a typical document's nodes and text. */
    p.arena.next = len < ((size_t)10 << 20) ? 6 * len + 4096 : (size_t)64 << 20;
    skip_ws(&p);
    v = parse_value(&p, 0);
    if (v != NULL) {
        skip_ws(&p);
        if (p.s != p.end)
            v = fail(&p, p.s, "extra data after the document");
    }
    free(p.stack);
    return v;
}

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

/* ---- serialising ---------------------------------------------------- */

static const char hexdigits[] = "0123456789abcdef";

static void add_u(struct xf_buf *out, unsigned cp)
{
    char e[6] = {'\\', 'u', hexdigits[(cp >> 12) & 15], hexdigits[(cp >> 8) & 15],
                 hexdigits[(cp >> 4) & 15], hexdigits[cp & 15]};
    xf_buf_add(out, e, 6);
}

/* A built string as json.dumps(ensure_ascii=True) spells it.  Bytes that
 * are not UTF-8 come out as \udcXX, the surrogateescape code points
 * Python gives them when it decodes such bytes from the file system. */
static void write_escaped(const char *str, size_t len, struct xf_buf *out)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;

    xf_buf_add(out, "\"", 1);
    while (s < end) {
        const unsigned char *run = s;
        unsigned long cp;
        size_t n;
        while (s < end && *s >= 0x20 && *s < 0x7F && *s != '"' && *s != '\\')
            s++;
        if (s > run)
            xf_buf_add(out, (const char *)run, (size_t)(s - run));
        if (s == end)
            break;
        switch (*s) {
        case '"': xf_buf_add(out, "\\\"", 2); s++; continue;
        case '\\': xf_buf_add(out, "\\\\", 2); s++; continue;
        case '\n': xf_buf_add(out, "\\n", 2); s++; continue;
        case '\r': xf_buf_add(out, "\\r", 2); s++; continue;
        case '\t': xf_buf_add(out, "\\t", 2); s++; continue;
        case '\b': xf_buf_add(out, "\\b", 2); s++; continue;
        case '\f': xf_buf_add(out, "\\f", 2); s++; continue;
        default: break;
        }
        n = utf8_len(s, end);
        if (n == 0) {
            add_u(out, 0xDC00u + *s);
            s++;
            continue;
        }
        if (n == 1)
            cp = *s;
        else if (n == 2)
            cp = (unsigned long)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        else if (n == 3)
            cp = (unsigned long)(s[0] & 0x0F) << 12 | (unsigned long)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        else
            cp = (unsigned long)(s[0] & 0x07) << 18 | (unsigned long)(s[1] & 0x3F) << 12 |
                 (unsigned long)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
        s += n;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            add_u(out, 0xD800u + (unsigned)(cp >> 10));
            add_u(out, 0xDC00u + (unsigned)(cp & 0x3FF));
        } else
            add_u(out, (unsigned)cp);
    }
    xf_buf_add(out, "\"", 1);
}

static void write_scalar_string(const fj *v, struct xf_buf *out)
{
    if (v->raw != NULL)
        xf_buf_add(out, v->raw, v->rawlen);
    else
        write_escaped(v->str ? v->str : "", v->str ? v->len : 0, out);
}

void fj_write(const fj *v, struct xf_buf *out)
{
    size_t i;

    if (v == NULL) {
        xf_buf_add(out, "null", 4);
        return;
    }
    switch (v->type) {
    case FJ_NULL:
        xf_buf_add(out, "null", 4);
        break;
    case FJ_FALSE:
        xf_buf_add(out, "false", 5);
        break;
    case FJ_TRUE:
        xf_buf_add(out, "true", 4);
        break;
    case FJ_NUMBER:
        if (v->raw != NULL)
            xf_buf_add(out, v->raw, v->rawlen);
        else if (v->str != NULL)
            xf_buf_add(out, v->str, v->len);
        else
            xf_buf_addf(out, "%lld", v->num);
        break;
    case FJ_STRING:
        write_scalar_string(v, out);
        break;
    case FJ_ARRAY:
        xf_buf_add(out, "[", 1);
        for (i = 0; i < v->n; i++) {
            if (i)
                xf_buf_add(out, ",", 1);
            fj_write(v->items[i], out);
        }
        xf_buf_add(out, "]", 1);
        break;
    case FJ_OBJECT:
        xf_buf_add(out, "{", 1);
        for (i = 0; i < v->n; i++) {
            if (i)
                xf_buf_add(out, ",", 1);
            write_scalar_string(v->keys[i], out);
            xf_buf_add(out, ":", 1);
            fj_write(v->items[i], out);
        }
        xf_buf_add(out, "}", 1);
        break;
    }
}
