/* Plain YAML scalars typed as go-yaml v2 resolves them: see yaml_scalar.h
 * and yaml.h (the rules). */
#include "lib/yaml_scalar.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int one_of(const char *s, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strcmp(s, *words) == 0)
            return 1;
    return 0;
}

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

/* A plain scalar's type (go-yaml v2 resolve); 0 with *why set when it is
 * one we refuse (a merge key, an infinity or NaN). */
int resolve_plain(const char *s, size_t len, struct scalar *out, const char **why)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
    static const char *const falses[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
                                         NULL};
    static const char *const specials[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf",
                                           "-.INF", ".nan", ".NaN", ".NAN", NULL};
    char plain[64];
    size_t n = 0;

    out->kind = K_STR;
    if (strlen(s) != len)
        return 1;  /* a NUL inside: only a string */
    if (one_of(s, nulls)) {
        out->kind = K_NULL;
        return 1;
    }
    if (one_of(s, trues) || one_of(s, falses)) {
        out->kind = K_BOOL;
        out->b = one_of(s, trues);
        return 1;
    }
    if (strcmp(s, "<<") == 0) {
        *why = "a YAML merge key (<<): write the merged members out";
        return 0;
    }
    if (one_of(s, specials)) {
        *why = "an infinite or NaN number, which JSON cannot hold";
        return 0;
    }
    if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '+' || s[0] == '-' || s[0] == '.'))
        return 1;
    for (size_t i = 0; i < len; i++)  /* go-yaml drops every '_' first */
        if (s[i] != '_') {
            if (n + 1 >= sizeof(plain))
                return 1;  /* longer than any number we type: a string */
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
                return 1;
            }
            if (plain[0] != '-' && u <= (unsigned long long)LLONG_MAX) {
                out->kind = K_INT;
                out->i = (long long)u;
                return 1;
            }
            if (plain[0] != '+' && plain[0] != '-') {  /* ParseUint takes no sign */
                out->kind = K_UINT;
                out->u = u;
                return 1;
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

static fj *string_node(const char *s, size_t len)
{
    fj *v = fj_new(FJ_STRING);
    v->str = xf_strndup(s, len);
    v->len = len;
    v->has_nul = memchr(s, '\0', len) != NULL;
    return v;
}

static fj *number_node(char *text, int is_int, long long num)
{
    fj *v = fj_new(FJ_NUMBER);
    v->str = v->raw = text;
    v->len = v->rawlen = strlen(text);
    v->is_int = is_int;
    v->num = num;
    return v;
}

/* A typed scalar as a tree node; as_string: its text as a string field
 * of the Go library's structs gets it. */
fj *scalar_node(const struct scalar *sc, const char *s, size_t len, int as_string)
{
    switch (sc->kind) {
    case K_NULL:
        return fj_new(FJ_NULL);
    case K_BOOL:
        return as_string ? fj_new_str(sc->b ? "true" : "false") : fj_new(sc->b ? FJ_TRUE : FJ_FALSE);
    case K_INT:
        return as_string ? fj_new_str(xf_printf("%lld", sc->i)) : fj_new_int(sc->i);
    case K_UINT:
        return as_string ? fj_new_str(xf_printf("%llu", sc->u)) : number_node(xf_printf("%llu", sc->u), 0, 0);
    case K_FLOAT:
        if (as_string)
            return fj_new_str(go_float32_text(sc->d));
        /* as JSON carries a float64: an integral one as an integer */
        if (sc->d == floor(sc->d) && fabs(sc->d) < 9.2e18)
            return fj_new_int((long long)sc->d);
        return number_node(shortest_double(sc->d), 0, 0);
    case K_STR:
        break;
    }
    return string_node(s, len);
}

/* A map key's text, as sigs.k8s.io/yaml converts keys; NULL (why set) for
 * keys it refuses. */
fj *key_node(const struct scalar *sc, const char *s, size_t len, const char **why)
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
        return fj_new_str(strcmp(t, "+Inf") == 0 ? ".inf" : strcmp(t, "-Inf") == 0 ? "-.inf" : t);
    }
    default:
        return scalar_node(sc, s, len, 1);
    }
}

/* CDI spec fields that are not strings (tags.cncf.io/container-device-interface/specs-go). */
int typed_field(const char *key)
{
    static const char *const fields[] = {"major", "minor", "fileMode", "uid", "gid", "timeout", "additionalGids",
                                         "enableMonitoring", "enableCMT", "enableMBM", NULL};
    return key != NULL && one_of(key, fields);
}
