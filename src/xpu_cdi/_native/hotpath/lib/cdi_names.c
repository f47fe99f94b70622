/* Qualified CDI device names and cdi.k8s.io/ annotations (cdi_names.h).
 * The CDI name rules are character-class checks (name_like); whatever
 * they refuse is XF_ERR, worded with the rule that was broken. */
#include "lib/cdi_names.h"

#include <stdlib.h>
#include <string.h>

#define ANNOTATION_PREFIX "cdi.k8s.io/" /* names.ANNOTATION_PREFIX */
#define PREFIX_LEN (sizeof(ANNOTATION_PREFIX) - 1)
#define MAX_ANNOTATION_NAME 63          /* names.MAX_ANNOTATION_NAME */

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

#define NAME_RULE "start with a letter, end with a letter or digit, and use only [A-Za-z0-9_.-]"

/* names.parse_qualified: vendor/class=name; XF_ERR says what is wrong with it. */
static int check_qualified(const char *d, size_t n)
{
    const char *eq = memchr(d, '=', n), *slash;
    size_t klen, vlen;

    if (eq == NULL)
        return xf_say(XF_ERR, "CDI device %s is not fully qualified: write it as vendor/class=name, "
                      "e.g. kunlunxin.com/xpu=0", xf_quoted_short(d, n));
    klen = (size_t)(eq - d);
    slash = memchr(d, '/', klen);
    if (slash == NULL)
        return xf_say(XF_ERR, "CDI device %s: kind %s must be 'vendor/class'", xf_quoted_short(d, n),
                      xf_quoted_short(d, klen));
    vlen = (size_t)(slash - d);
    if (!name_like(d, vlen, 1, "_.-"))
        return xf_say(XF_ERR, "CDI device %s: vendor %s must " NAME_RULE, xf_quoted_short(d, n),
                      xf_quoted_short(d, vlen));
    if (!name_like(slash + 1, klen - vlen - 1, 1, "_.-"))
        return xf_say(XF_ERR, "CDI device %s: class %s must " NAME_RULE, xf_quoted_short(d, n),
                      xf_quoted_short(slash + 1, klen - vlen - 1));
    if (!name_like(eq + 1, n - klen - 1, 0, "_.:-"))
        return xf_say(XF_ERR, "CDI device %s: device name %s must start and end with a letter or digit and use "
                      "only [A-Za-z0-9_.:-]", xf_quoted_short(d, n), xf_quoted_short(eq + 1, n - klen - 1));
    return XF_OK;
}

/* The members of a comma list in order: *d / *dlen each, stripped. */
static int next_member(const char **p, const char *end, const char **d, size_t *dlen)
{
    const char *comma;

    if (*p == NULL)
        return 0;
    comma = memchr(*p, ',', (size_t)(end - *p));
    *d = *p;
    *dlen = (size_t)((comma ? comma : end) - *p);
    xf_strip_space(d, dlen);
    *p = comma ? comma + 1 : NULL;
    return 1;
}

/* names.parse_annotation_value for a key already checked. */
static int annotation_devices(const char *key, const fj *value, struct xf_nameset *out)
{
    const char *k = xf_quoted_short(key, strlen(key)), *p, *end, *d;
    size_t dlen;

    if (fj_str(value) == NULL)
        return xf_say(XF_ERR, "annotation %s: the value must be a string of CDI devices such as "
                      "kunlunxin.com/xpu=0", k);
    end = value->str + value->len;
    for (p = value->str; next_member(&p, end, &d, &dlen);) /* any empty member refuses the whole value */
        if (dlen == 0)
            return xf_say(XF_ERR, "annotation %s: value %s must be a comma-separated list of CDI devices such "
                          "as kunlunxin.com/xpu=0", k, xf_quoted_short(value->str, value->len));
    for (p = value->str; next_member(&p, end, &d, &dlen);) {
        if (check_qualified(d, dlen) != XF_OK)
            return xf_wrap(XF_ERR, "annotation %s", k);
        xf_nameset_add(out, xf_strndup(d, dlen));
    }
    return XF_OK;
}

/* The cdi.k8s.io/ members of state's then config's annotations, later
 * winning (the bundle's config.json is the container's own), sorted by key. */
int xf_annotation_names(const fj *ann_state, const fj *ann_config, struct xf_nameset *out)
{
    const fj *sources[2] = {ann_state, ann_config};
    struct xf_strmap values = {0};
    struct xf_ptrvec keys = {0};

    for (size_t s = 0; s < 2; s++) {
        const fj *src = sources[s];
        if (src == NULL || src->type == FJ_NULL)
            continue;
        if (src->type != FJ_OBJECT)
            return xf_say(XF_ERR, "annotations must be an object");
        for (size_t i = 0; i < src->n; i++) {
            const fj *k = src->keys[i];
            if (k->len < PREFIX_LEN || memcmp(k->str, ANNOTATION_PREFIX, PREFIX_LEN) != 0)
                continue;
            if (k->has_nul)
                return xf_say(XF_ERR, "annotation key %s: the part after the prefix must start and end with a "
                              "letter or digit and use only [A-Za-z0-9_.-]", xf_quoted_short(k->str, k->len));
            if (xf_strmap_put(&values, k->str, src->items[i]) == NULL)
                xf_ptrvec_add(&keys, k->str);
        }
    }
    if (keys.n > 1) /* UTF-8 byte order is code point order */
        qsort(keys.v, keys.n, sizeof(*keys.v), xf_strcmp_ptr);
    for (size_t i = 0; i < keys.n; i++) {
        const char *key = keys.v[i], *rest = key + PREFIX_LEN;
        size_t rlen = strlen(rest);
        /* names.annotation_key_problem; over 63 bytes is over 63 characters or not ASCII: refused either way */
        if (rlen > MAX_ANNOTATION_NAME)
            return xf_say(XF_ERR, "annotation key %s: the part after the prefix is longer than %d characters",
                          xf_quoted_short(key, strlen(key)), MAX_ANNOTATION_NAME);
        if (!name_like(rest, rlen, 0, "_.-"))
            return xf_say(XF_ERR, "annotation key %s: the part after the prefix must start and end with a letter "
                          "or digit and use only [A-Za-z0-9_.-]", xf_quoted_short(key, strlen(key)));
        if (annotation_devices(key, xf_strmap_get(&values, key), out) != XF_OK)
            return XF_ERR;
    }
    free(values.keys);
    free(values.vals);
    return XF_OK;
}
