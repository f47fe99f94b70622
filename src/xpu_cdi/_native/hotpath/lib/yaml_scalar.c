/* Plain YAML scalars typed as go-yaml v2 resolves them: see yaml_scalar.h
 * and yaml.h (the rules). */
#include "lib/yaml_scalar.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The YAML 1.1 words go-yaml v2 types (its resolve table), by length and
 * text; a plain scalar is looked up here only when it starts like one. */
enum word { W_NONE, W_NULL, W_TRUE, W_FALSE, W_MERGE, W_SPECIAL };

static enum word word_of(const char *s, size_t len)
{
    static const struct {
        char text[6];
        unsigned char kind;
    } words[] = { /* by length: the words of length n are words[first[n]:first[n + 1]] */
        {"~", W_NULL},      {"y", W_TRUE},       {"Y", W_TRUE},       {"n", W_FALSE},      {"N", W_FALSE},
        {"on", W_TRUE},     {"On", W_TRUE},      {"ON", W_TRUE},      {"no", W_FALSE},     {"No", W_FALSE},
        {"NO", W_FALSE},    {"<<", W_MERGE},
        {"yes", W_TRUE},    {"Yes", W_TRUE},     {"YES", W_TRUE},     {"off", W_FALSE},    {"Off", W_FALSE},
        {"OFF", W_FALSE},
        {"null", W_NULL},   {"Null", W_NULL},    {"NULL", W_NULL},    {"true", W_TRUE},    {"True", W_TRUE},
        {"TRUE", W_TRUE},   {".inf", W_SPECIAL}, {".Inf", W_SPECIAL}, {".INF", W_SPECIAL}, {".nan", W_SPECIAL},
        {".NaN", W_SPECIAL}, {".NAN", W_SPECIAL},
        {"false", W_FALSE}, {"False", W_FALSE},  {"FALSE", W_FALSE},  {"+.inf", W_SPECIAL}, {"+.Inf", W_SPECIAL},
        {"+.INF", W_SPECIAL}, {"-.inf", W_SPECIAL}, {"-.Inf", W_SPECIAL}, {"-.INF", W_SPECIAL},
    };
    static const unsigned char first[] = {0, 0, 5, 12, 18, 30, 39};

    if (len == 0)
        return W_NULL;
    if (len > 5)
        return W_NONE;
    for (size_t i = first[len]; i < first[len + 1]; i++)
        if (words[i].text[0] == s[0] && memcmp(words[i].text, s, len) == 0)
            return (enum word)words[i].kind;
    return W_NONE;
}

const unsigned char fy_typed_start[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['+'] = 1, ['-'] = 1, ['.'] = 1, ['~'] = 1, ['<'] = 1, ['n'] = 1, ['N'] = 1, ['y'] = 1, ['Y'] = 1,
    ['t'] = 1, ['T'] = 1, ['f'] = 1, ['F'] = 1, ['o'] = 1, ['O'] = 1,
};

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return 99;
}

/* Go's strconv.ParseUint(s, 0, 64) of an unsigned text: 0x.., 0b.., 0o..,
 * 0.. (octal) or decimal; 0 when it is not one, or overflows. */
static int parse_uint0(const char *s, unsigned long long *out)
{
    int base = 10;
    unsigned long long v = 0;

    if (s[0] == '0' && (s[1] | 0x20) == 'x')
        base = 16, s += 2;
    else if (s[0] == '0' && (s[1] | 0x20) == 'b')
        base = 2, s += 2;
    else if (s[0] == '0' && (s[1] | 0x20) == 'o')
        base = 8, s += 2;
    else if (s[0] == '0' && s[1] != '\0')
        base = 8, s += 1;
    if (*s == '\0')
        return 0;
    for (; *s != '\0'; s++) {
        int d = digit_value(*s);
        if (d >= base || v > (ULLONG_MAX - (unsigned)d) / (unsigned)base)
            return 0;
        v = v * (unsigned)base + (unsigned)d;
    }
    *out = v;
    return 1;
}

/* yaml.v2's float syntax: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static int float_syntax(const char *s)
{
    size_t n = 0;

    if (*s == '+' || *s == '-')
        s++;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++)
            n++;
        if (n == 0)
            return 0;
    } else {
        for (; *s >= '0' && *s <= '9'; s++)
            n++;
        if (n == 0)
            return 0;
        if (*s == '.')
            for (s++; *s >= '0' && *s <= '9'; s++)
                ;
    }
    if (*s == 'e' || *s == 'E') {
        n = 0;
        s++;
        if (*s == '+' || *s == '-')
            s++;
        for (; *s >= '0' && *s <= '9'; s++)
            n++;
        if (n == 0)
            return 0;
    }
    return *s == '\0';
}

/* The number s[0:len] (a plain scalar starting with a digit, sign or dot)
 * as go-yaml v2 types it: into *out, which stays a string when it is none. */
static void resolve_number(const char *s, size_t len, struct scalar *out)
{
    char plain[64];
    size_t n = 0;

    for (size_t i = 0; i < len; i++)  /* go-yaml drops every '_' first */
        if (s[i] != '_') {
            if (n + 1 >= sizeof(plain))
                return;  /* longer than any number we type: a string */
            plain[n++] = s[i];
        }
    plain[n] = '\0';
    if (s[0] != '.') {
        const char *digits = plain + (plain[0] == '+' || plain[0] == '-');
        unsigned long long u;
        if (parse_uint0(digits, &u)) {
            if (plain[0] == '-' && u <= (unsigned long long)LLONG_MAX + 1) {
                out->kind = K_INT;
                out->i = u == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)u;
                return;
            }
            if (plain[0] != '-' && u <= (unsigned long long)LLONG_MAX) {
                out->kind = K_INT;
                out->i = (long long)u;
                return;
            }
            if (plain[0] != '+' && plain[0] != '-') {  /* ParseUint takes no sign */
                out->kind = K_UINT;
                out->u = u;
                return;
            }
        }
    }
    if (float_syntax(plain)) {
        double d;
        errno = 0;
        d = strtod(plain, NULL);
        if (errno != ERANGE || fabs(d) < 1.0) {  /* ParseFloat: an overflow is an error (a string then) */
            out->kind = K_FLOAT;
            out->d = d;
        }
    }
}

/* A plain scalar's type (go-yaml v2 resolve); 0 with *why set when it is
 * one we refuse (a merge key, an infinity or NaN). */
int resolve_plain(const char *s, size_t len, struct scalar *out, const char **why)
{
    enum word w;

    out->kind = K_STR;
    if (!fy_may_be_typed(s, len))
        return 1;
    if (memchr(s, '\0', len) != NULL)
        return 1;  /* a NUL inside (a tagged double-quoted scalar): only a string */
    switch ((w = s[0] >= '0' && s[0] <= '9' ? W_NONE : word_of(s, len))) {  /* no word starts with a digit */
    case W_NULL:
        out->kind = K_NULL;
        return 1;
    case W_TRUE:
    case W_FALSE:
        out->kind = K_BOOL;
        out->b = w == W_TRUE;
        return 1;
    case W_MERGE:
        *why = "a YAML merge key (<<): write the merged members out";
        return 0;
    case W_SPECIAL:
        *why = "an infinite or NaN number, which JSON cannot hold";
        return 0;
    case W_NONE:
        break;
    }
    if ((s[0] >= '0' && s[0] <= '9') || s[0] == '+' || s[0] == '-' || s[0] == '.')
        resolve_number(s, len, out);
    return 1;
}

/* The shortest text that reads back as d ("%.{p}g" for the least p). */
static char *shortest_double(double d)
{
    char buf[40];

    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return xf_strdup(buf);
}

/* Go's strconv.FormatFloat(d, 'g', -1, 32): how sigs.k8s.io/yaml turns a
 * float into a string field's text. */
static char *go_float32_text(double d)
{
    float f = (float)d;
    char e[40];
    int p, exp;

    if (isinf(f))  /* a double beyond float32 */
        return xf_strdup(f > 0 ? "+Inf" : "-Inf");
    for (p = 1; p < 9; p++) {
        snprintf(e, sizeof(e), "%.*e", p - 1, (double)f);
        if ((float)strtod(e, NULL) == f)
            break;
    }
    snprintf(e, sizeof(e), "%.*e", p - 1, (double)f);
    exp = atoi(strchr(e, 'e') + 1);
    if (exp < -4 || exp >= 6)  /* %e form for shortest precision, as Go decides */
        return xf_strdup(e);
    return xf_printf("%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, (double)f);
}

/* A node of text[0:len], which is NUL-terminated and is kept, not copied. */
fj *text_kept(struct xf_arena *a, enum fj_type type, const char *text, size_t len, int may_hold_nul)
{
    fj *v = xf_arena_get(a, sizeof(*v));

    v->type = type;
    v->str = text;
    v->len = len;
    v->has_nul = may_hold_nul && type == FJ_STRING && memchr(text, '\0', len) != NULL;
    return v;
}

/* A node in the arena: a string or number of text[0:len] (copied), or a null/boolean (text NULL). */
static fj *node_of(struct xf_arena *a, enum fj_type type, const char *text, size_t len)
{
    fj *v;

    if (text != NULL)
        return text_kept(a, type, xf_arena_text(a, text, len), len, 1);
    v = xf_arena_get(a, sizeof(*v));
    v->type = type;
    return v;
}

static fj *text_node(struct xf_arena *a, enum fj_type type, const char *text)
{
    return node_of(a, type, text, strlen(text));
}

/* The decimal text of v (negative: of -v) ending at end: snprintf's "%llu" without its
 * cost, which was a fifth of a spec's scalars' (a major and a minor per node). */
static char *decimal(char *end, unsigned long long v, int negative)
{
    char *p = end;

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (negative)
        *--p = '-';
    return p;
}

static fj *int_node(struct xf_arena *a, long long i, int as_string)
{
    char text[24];
    const char *t = decimal(text + sizeof(text), i < 0 ? 0 - (unsigned long long)i : (unsigned long long)i, i < 0);
    fj *v = node_of(a, as_string ? FJ_STRING : FJ_NUMBER, t, (size_t)(text + sizeof(text) - t));

    v->is_int = !as_string;
    v->num = as_string ? 0 : i;
    return v;
}

/* A typed scalar as a tree node; as_string: its text as a string field
 * of the Go library's structs gets it. */
fj *scalar_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, int as_string)
{
    char text[24];

    switch (sc->kind) {
    case K_NULL:
        return node_of(a, FJ_NULL, NULL, 0);
    case K_BOOL:
        if (as_string)
            return text_node(a, FJ_STRING, sc->b ? "true" : "false");
        return node_of(a, sc->b ? FJ_TRUE : FJ_FALSE, NULL, 0);
    case K_INT:
        return int_node(a, sc->i, as_string);
    case K_UINT: {
        const char *t = decimal(text + sizeof(text), sc->u, 0);
        return node_of(a, as_string ? FJ_STRING : FJ_NUMBER, t, (size_t)(text + sizeof(text) - t));
    }
    case K_FLOAT:
        if (as_string)
            return text_node(a, FJ_STRING, go_float32_text(sc->d));
        /* as JSON carries a float64: an integral one as an integer */
        if (sc->d == floor(sc->d) && fabs(sc->d) < 9.2e18)
            return int_node(a, (long long)sc->d, 0);
        return text_node(a, FJ_NUMBER, shortest_double(sc->d));
    case K_STR:
        break;
    }
    return node_of(a, FJ_STRING, s, len);
}

/* A map key's text, as sigs.k8s.io/yaml converts keys; NULL (why set) for
 * keys it refuses. */
fj *key_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, const char **why)
{
    switch (sc->kind) {
    case K_NULL:
        *why = "a null mapping key";
        return NULL;
    case K_UINT:
        *why = "a mapping key beyond the signed 64-bit range";
        return NULL;
    case K_FLOAT: {
        const char *t = go_float32_text(sc->d);
        /* sigs.k8s.io/yaml spells the infinities as YAML does in keys */
        return text_node(a, FJ_STRING, strcmp(t, "+Inf") == 0 ? ".inf" : strcmp(t, "-Inf") == 0 ? "-.inf" : t);
    }
    default:
        return scalar_node(a, sc, s, len, 1);
    }
}

/* CDI spec fields that are not strings (tags.cncf.io/container-device-interface/specs-go). */
int typed_field(const char *key)
{
    static const char *const fields[] = {"major", "minor", "fileMode", "uid", "gid", "timeout", "additionalGids",
                                         "enableMonitoring", "enableCMT", "enableMBM"};

    if (key == NULL || strchr("mfugtae", key[0]) == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(key, fields[i]) == 0)
            return 1;
    return 0;
}
