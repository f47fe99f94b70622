/* Writing the JSON tree back (json.h's fj_dump / fj_write) by yajl's
 * generator: compact, numbers as their source text, strings re-escaped. */
#include "lib/json.h"
#include "lib/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <yajl/yajl_gen.h>

/* ---- serialising (yajl's generator) ----------------------------------- */

static void print_to_buf(void *ctx, const char *s, size_t n)
{
    xf_buf_add(ctx, s, n);
}

/* s with every byte that is not part of well-formed UTF-8 replaced by
 * U+FFFD (what Go's decoder, hence runc, makes of such bytes anyway);
 * s itself when it is all well-formed. */
static const char *as_utf8(const char *s, size_t n, size_t *outlen, struct xf_buf *scratch)
{
    const unsigned char *u = (const unsigned char *)s, *end = u + n;

    *outlen = n;
    if (utf8_valid(u, n))
        return s;
    scratch->len = 0;
    while (u < end) {
        size_t k = utf8_len(u, end);
        if (k == 0) {
            xf_buf_add(scratch, "\xef\xbf\xbd", 3);
            u++;
        } else {
            xf_buf_add(scratch, (const char *)u, k);
            u += k;
        }
    }
    *outlen = scratch->len;
    return scratch->data;
}

static yajl_gen_status gen_string(yajl_gen g, const fj *v, struct xf_buf *scratch)
{
    size_t n;
    const char *s = as_utf8(v->str ? v->str : "", v->str ? v->len : 0, &n, scratch);
    return yajl_gen_string(g, (const unsigned char *)s, n);
}

static yajl_gen_status gen(yajl_gen g, const fj *v, struct xf_buf *scratch)
{
    yajl_gen_status st = yajl_gen_status_ok;
    char num[32];

    if (v == NULL)
        return yajl_gen_null(g);
    switch (v->type) {
    case FJ_NULL:
        return yajl_gen_null(g);
    case FJ_FALSE:
    case FJ_TRUE:
        return yajl_gen_bool(g, v->type == FJ_TRUE);
    case FJ_NUMBER:
        /* the number's own text: parsed numbers keep their spelling */
        if (v->str != NULL)
            return yajl_gen_number(g, v->str, v->len);
        return yajl_gen_number(g, num, (size_t)snprintf(num, sizeof(num), "%lld", v->num));
    case FJ_STRING:
        return gen_string(g, v, scratch);
    case FJ_ARRAY:
        st = yajl_gen_array_open(g);
        for (size_t i = 0; st == yajl_gen_status_ok && i < v->n; i++)
            st = gen(g, v->items[i], scratch);
        return st == yajl_gen_status_ok ? yajl_gen_array_close(g) : st;
    case FJ_OBJECT:
        st = yajl_gen_map_open(g);
        for (size_t i = 0; st == yajl_gen_status_ok && i < v->n; i++)
            if ((st = gen_string(g, v->keys[i], scratch)) == yajl_gen_status_ok)
                st = gen(g, v->items[i], scratch);
        return st == yajl_gen_status_ok ? yajl_gen_map_close(g) : st;
    }
    return yajl_gen_invalid_string;
}

int fj_dump(const fj *v, struct xf_buf *out, char *err, size_t errlen)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    struct xf_buf scratch = {0};
    yajl_gen_status st;

    if (g == NULL)
        abort();
    /* compact (no beautify), '/' not escaped; no yajl_gen_validate_utf8:
     * as_utf8 made every string well-formed already */
    yajl_gen_config(g, yajl_gen_print_callback, print_to_buf, out);
    st = gen(g, v, &scratch);
    yajl_gen_free(g);
    free(scratch.data);
    if (st == yajl_gen_status_ok)
        return 0;
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "cannot write JSON: %s",
                 st == yajl_max_depth_exceeded ? "nested deeper than the writer's limit" : "yajl refused a value");
    return -1;
}

void fj_write(const fj *v, struct xf_buf *out)
{
    char err[128];

    if (fj_dump(v, out, err, sizeof(err)) != 0) {
        /* only a tree built deeper than any parsed one gets here */
        fprintf(stderr, "xpu-cdi: %s\n", err);
        abort();
    }
}
