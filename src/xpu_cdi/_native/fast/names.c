/* Qualified CDI device names and cdi.k8s.io/ annotations: the C twin of
 * xpu_cdi.cdi.names (parse_qualified, annotation_key_problem,
 * parse_annotation_value, devices_from_annotations), see names.h.  The
 * regular expressions there are character-class checks here (name_like);
 * whatever they would refuse is XF_DEFER, and Python says why. */
#include "names.h"

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
static int annotation_devices(const char *key, const fj *value, struct rq_names *out)
{
    const char *s, *p, *end;
    size_t n;

    if (fj_str(value) == NULL) /* Python takes str(value): never a device list we should guess at */
        return xf_say(XF_DEFER, "annotation %s: not a string", key);
    if (!rq_is_ascii(value->str, value->len))
        return xf_say(XF_DEFER, "annotation %s: not ASCII", key);
    s = value->str;
    n = value->len;
    rq_strip(&s, &n);
    if (n == 0)
        return xf_say(XF_DEFER, "annotation %s: empty value", key);
    for (p = value->str, end = value->str + value->len;; p++) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *d = p;
        size_t dlen = (size_t)((comma ? comma : end) - p);
        rq_strip(&d, &dlen);
        if (!qualified_ok(d, dlen))
            return xf_say(XF_DEFER, "annotation %s: '%.*s' is not a qualified CDI device", key,
                          (int)(dlen > 100 ? 100 : dlen), d);
        rq_names_add(out, xf_strndup(d, dlen));
        if (comma == NULL)
            break;
        p = comma;
    }
    return XF_OK;
}

/* The cdi.k8s.io/ members of state's then config's annotations, later
 * winning (state.container), sorted by key (devices_from_annotations). */
int rq_annotation_names(const fj *ann_state, const fj *ann_config, struct rq_names *out)
{
    const fj *sources[2] = {ann_state, ann_config};
    struct rq_map values = {0};
    struct rq_vec keys = {0};

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
            if (rq_map_put(&values, k->str, src->items[i]) == NULL)
                rq_vec_add(&keys, k->str);
        }
    }
    if (keys.n > 1) /* UTF-8 byte order is code point order */
        qsort(keys.v, keys.n, sizeof(*keys.v), rq_cmp_str);
    for (size_t i = 0; i < keys.n; i++) {
        const char *key = keys.v[i], *rest = key + PREFIX_LEN;
        size_t rlen = strlen(rest);
        /* names.annotation_key_problem; over 63 bytes is over 63 characters or not ASCII: refused either way */
        if (rlen > MAX_ANNOTATION_NAME || !name_like(rest, rlen, 0, "_.-"))
            return xf_say(XF_DEFER, "annotation key %.100s is not valid", key);
        if (annotation_devices(key, rq_map_get(&values, key), out) != XF_OK)
            return XF_DEFER;
    }
    free(values.keys);
    free(values.vals);
    return XF_OK;
}
