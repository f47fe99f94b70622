/* See strings.h. */
#include "lib/strings.h"

#include <stdlib.h>
#include <string.h>

/* ASCII whitespace: space, \t, \n, \v, \f, \r (isspace() of the C
 * locale); other control bytes are no padding but part of the value. */
static int ascii_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

void xf_strip_space(const char **s, size_t *n)
{
    while (*n > 0 && ascii_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ascii_space((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

int xf_is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

int xf_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* d and name with one "/" between them (none added after a trailing one). */
char *xf_path_join(const char *d, const char *name)
{
    size_t n = strlen(d);

    return xf_strcat3(d, n == 0 || d[n - 1] == '/' ? "" : "/", name);
}

/* see strings.h */
int fj_truthy(const fj *v)
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
        /* an integer too big for long long is not 0; any other number is 0 when its value is (0.0, -0e5) */
        return v->is_int ? v->num != 0 : strtod(v->str, NULL) != 0;
    case FJ_STRING:
        return v->len > 0;
    case FJ_ARRAY:
    case FJ_OBJECT:
        return v->n > 0;
    }
    return 0;
}

int xf_strcmp_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fj_strings_or_absent(const fj *v)
{
    if (v == NULL)
        return 1; /* absent: no strings */
    if (v->type != FJ_ARRAY)
        return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->type != FJ_STRING)
            return 0;
    return 1;
}

/* see strings.h */
char *xf_quoted(const char *s, size_t n)
{
    struct xf_buf b = {0};
    char q = memchr(s, '\'', n) != NULL && memchr(s, '"', n) == NULL ? '"' : '\'';

    xf_buf_add(&b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == (unsigned char)q)
            xf_buf_addf(&b, "\\%c", c);
        else if (c == '\n')
            xf_buf_adds(&b, "\\n");
        else if (c == '\r')
            xf_buf_adds(&b, "\\r");
        else if (c == '\t')
            xf_buf_adds(&b, "\\t");
        else if (c < 0x20 || c >= 0x7f)
            xf_buf_addf(&b, "\\x%02x", c);
        else
            xf_buf_add(&b, (const char *)&s[i], 1);
    }
    xf_buf_add(&b, &q, 1);
    return b.data;
}

/* see strings.h */
char *xf_quoted_short(const char *s, size_t n)
{
    if (n <= 100)
        return xf_quoted(s, n);
    return xf_printf("%s... (%zu characters)", xf_quoted(s, 60), n);
}
