/* See may_request.h. */
#include "lib/common.h"
#include "lib/may_request.h"
#include "lib/files.h"
#include "lib/strings.h"

#include <stdlib.h>
#include <string.h>

#define MAX_INDEX_TEXT ((size_t)1 << 20) /* as hook_index.c: a larger index is not used */

static int name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

struct span {
    const char *p;
    size_t n;
};

static int span_cmp(const void *x, const void *y)
{
    const struct span *a = x, *b = y;
    int c = memcmp(a->p, b->p, a->n < b->n ? a->n : b->n);

    if (c != 0)
        return c;
    return a->n < b->n ? -1 : a->n > b->n;
}

/* The identifiers NAME of every `"NAME=` in data, sorted, distinct.
 * `"NAME=` occurs in data exactly when NAME is the whole run of name
 * characters after some '"' and '=' follows it ('=' is not one of them),
 * so one pass finds every name a selection variable could match. */
static size_t config_names(const char *data, size_t len, struct span **out)
{
    const char *p = data, *end = data + len;
    struct span *v = NULL;
    size_t n = 0, cap = 0, k, m;

    while (p < end && (p = memchr(p, '"', (size_t)(end - p))) != NULL) {
        const char *s = ++p;
        while (p < end && name_char((unsigned char)*p))
            p++;
        if (p > s && p < end && *p == '=') {
            if (n == cap)
                v = xf_realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
            v[n].p = s;
            v[n++].n = (size_t)(p - s);
        }
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), span_cmp);
    for (k = 0, m = 0; k < n; k++)  /* drop repeats */
        if (m == 0 || span_cmp(&v[k], &v[m - 1]) != 0)
            v[m++] = v[k];
    *out = v;
    return m;
}

static int has_name(const struct span *names, size_t n, const char *p, size_t len)
{
    struct span key = {p, len};

    return n > 0 && bsearch(&key, names, n, sizeof(*names), span_cmp) != NULL;
}

/* Whether an index's text holds, between two '"' (or the text's ends),
 * a token that is one of names. */
static int index_mentions(const char *text, size_t len, const struct span *names, size_t n)
{
    const char *p = text, *end = text + len;

    for (;;) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        const char *stop = q ? q : end;
        size_t i;
        for (i = 0; p + i < stop && name_char((unsigned char)p[i]); i++)
            ;
        if (i > 0 && p + i == stop && has_name(names, n, p, i))
            return 1;
        if (q == NULL)
            return 0;
        p = q + 1;
    }
}

int xf_may_request(const char *data, size_t len, const char *const *dirs, size_t ndirs)
{
    struct span *names;
    size_t n = 0;

    if (memmem(data, len, "cdi.k8s.io", 10) != NULL)
        return 1;
    n = config_names(data, len, &names);
    if (n == 0)
        return 0;
    /* the profiles' known selection variables are in every index's text
     * (knownSelection), so the scan below sees them too */
    for (size_t d = 0; d < ndirs; d++) {
        char **files;
        size_t nfiles;
        if (xf_list_dir(dirs[d], &files, &nfiles) != 0)
            continue;
        for (size_t i = 0; i < nfiles; i++) {
            char *text;
            size_t tl;
            struct stat st;
            if (xf_ends_with(files[i], INDEX_SUFFIX) &&
                xf_read_regular(xf_path_join(dirs[d], files[i]), MAX_INDEX_TEXT, &text, &tl, &st) == RD_OK &&
                index_mentions(text, tl, names, n))
                return 1;
        }
    }
    return 0;
}
