/* Which devices a container asked for (request.h's xf_requested): its
 * selection variables' values read with each kind's syntax, as the hook
 * index gives it, and the cdi.k8s.io/ annotations (cdi_names.c).  A token
 * only a profile's alias regex can read, non-ASCII text or a malformed
 * value is XF_ERR. */
#include "lib/request.h"
#include "lib/hook_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cdi_names.h"
#include "lib/collections.h"
#include "lib/strings.h"

#define MAX_RANGE 4096                    /* a range spans at most this many cards */
#define MAX_TOKEN 64                      /* bytes of one token */
#define MAX_VALUE ((size_t)1 << 16)       /* bytes of one value */

/* ---- selection values ---------------------------------------------------- */

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
    size_t pos;  /* position of its key in the index */
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

static int add_name(struct xf_nameset *out, const char *kind, const fj *name)
{
    if (fj_str(name) == NULL)
        return xf_say(XF_ERR, "index of %s: a device name with NUL", kind);
    xf_nameset_add(out, xf_strcat3(kind, "=", name->str));
    return XF_OK;
}

/* `all` with no "all" device: every card of the index by card number,
 * keys of the same number ("1", "01") in the index's order. */
static int all_cards(const char *kind, const fj *indices, struct xf_nameset *out)
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
            return XF_ERR;
    free(cards);
    return XF_OK;
}

/* VAR='value' for messages, shortened: the value is the container's and may be huge. */
static char *shown(const char *var, const char *value, size_t vlen)
{
    return xf_printf("%s=%s", var, xf_quoted_short(value, vlen));
}

/* A token that is no index, range, alias or `all` word: what to write instead. */
static int bad_token(const char *kind, const fj *sel, const char *what, const char *tok, size_t tlen)
{
    const fj *aliases = fj_get(sel, "aliases"), *words = fj_get(sel, "all");
    const char *uuids = fj_str(fj_get(sel, "uuidsFrom"));
    struct xf_buf b = {0};

    if (uuids != NULL && uuids[0] != '\0' && uuid_like(tok, tlen))
        return xf_say(XF_ERR, "%s: %s is a chip UUID, as %s sends them: select cards by index (0,1) or by CDI "
                      "name (cdi_devices or a cdi.k8s.io/ annotation, e.g. %s=0)", what, xf_quoted(tok, tlen), uuids,
                      kind);
    if (aliases != NULL && aliases->type == FJ_STRING)
        return xf_say(XF_ERR, "%s: %s is not a card index or a range like 0-3, and the hook index of %s predates "
                      "alias prefixes: regenerate it with `xpu-cdi generate`", what, xf_quoted(tok, tlen), kind);
    xf_buf_addf(&b, "%s: %s is not a card index, a range like 0-3", what, xf_quoted(tok, tlen));
    if (aliases != NULL && aliases->type == FJ_ARRAY && aliases->n > 0 && fj_str(aliases->items[0]) != NULL)
        xf_buf_addf(&b, ", a name like %s0", aliases->items[0]->str);
    xf_buf_adds(&b, " or ");
    if (words != NULL && words->type == FJ_ARRAY && words->n > 0) {
        for (size_t i = 0; i < words->n; i++)
            if (fj_str(words->items[i]) != NULL)
                xf_buf_addf(&b, "%s%s", i ? " / " : "", xf_quoted(words->items[i]->str, words->items[i]->len));
    } else {
        xf_buf_adds(&b, "'all'");
    }
    return xf_say(XF_ERR, "%s", b.data);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;

    return (x > y) - (x < y);
}

/* A card index the spec does not have: the cards it has, and how to refresh it. */
static int no_card(const char *kind, const fj *indices, const char *what, long i)
{
    struct xf_buf b = {0};
    long *known = xf_alloc((indices->n ? indices->n : 1) * sizeof(*known));
    size_t n = 0;

    for (size_t k = 0; k < indices->n; k++) {
        long v;
        size_t j;
        if (!card_index(indices->keys[k]->str, indices->keys[k]->len, &v))
            continue;
        for (j = 0; j < n && known[j] != v; j++)
            ;
        if (j == n)
            known[n++] = v;
    }
    qsort(known, n, sizeof(*known), cmp_long);
    for (size_t k = 0; k < n; k++)
        xf_buf_addf(&b, "%s%ld", k ? "," : "", known[k]);
    return xf_say(XF_ERR, "%s: no card %ld in the %s spec (cards: %s); regenerate with `xpu-cdi generate` if cards "
                  "changed", what, i, kind, n ? b.data : "none");
}

static int parse_value(const char *kind, const fj *index, const char *var, const char *value, size_t vlen,
                       struct xf_nameset *out)
{
    const fj *sel = fj_get(index, "selection"), *none = fj_get(sel, "none"), *indices, *all;
    const fj *words = fj_get(sel, "all");
    int fold = fj_get(sel, "ignoreCase") != NULL && fj_get(sel, "ignoreCase")->type == FJ_TRUE;
    const char *s = value, *p, *end;
    size_t n = vlen, nspans = 0, capspans = 0;
    struct span *spans = NULL;
    struct xf_strmap by_key = {0};
    int want_all = 0;
    long done = -1;
    static const char *const default_none[] = {"", "void", "none"};

    if (vlen > MAX_VALUE)
        return xf_say(XF_ERR, "%s: longer than %zu characters", shown(var, value, vlen), MAX_VALUE);
    if (!xf_is_ascii(value, vlen))
        return xf_say(XF_ERR, "%s: only ASCII card indices, ranges like 0-3 and names are understood",
                      shown(var, value, vlen));
    xf_strip_space(&s, &n);
    if (none != NULL && none->n > 0) {
        for (size_t i = 0; i < none->n; i++)
            if (word_is(none->items[i], s, n, fold))
                return XF_OK;
    } else {
        for (size_t i = 0; i < 3; i++)
            if (strlen(default_none[i]) == n &&
                (fold ? strncasecmp(default_none[i], s, n) : memcmp(default_none[i], s, n)) == 0)
                return XF_OK;
    }
    indices = fj_get(index, "indices");
    for (p = s, end = s + n;; p++) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *tok = p, *dash;
        size_t tlen = (size_t)((comma ? comma : end) - p);
        long lo = 0, hi = 0;
        int is_all;
        xf_strip_space(&tok, &tlen);
        is_all = 0;
        if (words != NULL && words->type == FJ_ARRAY && words->n > 0) {
            for (size_t i = 0; i < words->n && !is_all; i++)
                is_all = word_is(words->items[i], tok, tlen, fold);
        } else {
            is_all = tlen == 3 && (fold ? strncasecmp(tok, "all", 3) : memcmp(tok, "all", 3)) == 0;
        }
        if (is_all) {
            want_all = 1;
        } else if (card_index(tok, tlen, &lo)) {
            hi = lo;
        } else if ((dash = memchr(tok, '-', tlen)) != NULL && card_index(tok, (size_t)(dash - tok), &lo) &&
                   card_index(dash + 1, tlen - (size_t)(dash - tok) - 1, &hi)) {
            if (lo > hi || hi - lo >= MAX_RANGE)
                return xf_say(XF_ERR, "%s: range %s must be low-high with at most %d cards", shown(var, value, vlen),
                              xf_quoted(tok, tlen), MAX_RANGE);
        } else if (tlen > MAX_TOKEN) {
            return xf_say(XF_ERR, "%s: a token of %zu characters is not a card index or name", shown(var, value, vlen),
                          tlen);
        } else if (alias_index(fj_get(sel, "aliases"), tok, tlen, fold, &lo)) {
            hi = lo;
        } else {
            return bad_token(kind, sel, shown(var, value, vlen), tok, tlen);
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
        if (fj_truthy(all))
            return add_name(out, kind, all);
        return all_cards(kind, indices, out);
    }
    for (size_t i = 0; i < indices->n; i++) /* one value a key: the parser refuses duplicates */
        xf_strmap_put(&by_key, xf_strndup(indices->keys[i]->str, indices->keys[i]->len), indices->items[i]);
    if (nspans > 1)
        qsort(spans, nspans, sizeof(*spans), cmp_span);
    for (size_t k = 0; k < nspans; k++) {
        for (long i = spans[k].lo > done + 1 ? spans[k].lo : done + 1; i <= spans[k].hi; i++) {
            char key[24];
            const fj *name;
            snprintf(key, sizeof(key), "%ld", i);
            name = xf_strmap_get(&by_key, key);
            if (name == NULL)
                return no_card(kind, indices, shown(var, value, vlen), i);
            if (add_name(out, kind, name) != XF_OK)
                return XF_ERR;
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

/* ---- what a container asked for ------------------------------------------ */

const char *xf_selection_var(const struct xf_indexes *ix, const fj *env)
{
    if (env == NULL || env->type != FJ_ARRAY)
        return NULL;
    for (size_t k = 0; k < ix->n; k++) {
        const fj *vars = fj_get(fj_get(ix->items[k].json, "selection"), "env");
        for (size_t i = 0; vars != NULL && vars->type == FJ_ARRAY && i < vars->n; i++) {
            const char *value;
            size_t vlen;
            if (fj_str(vars->items[i]) != NULL &&
                env_lookup(env, vars->items[i]->str, vars->items[i]->len, &value, &vlen))
                return vars->items[i]->str;
        }
    }
    return NULL;
}

int xf_requested(const struct xf_indexes *ix, const fj *env, const fj *ann_state, const fj *ann_config,
                 const char ***names, size_t *n)
{
    struct xf_nameset out = {0};

    *names = NULL;
    *n = 0;
    if (env != NULL && env->type == FJ_NULL)
        env = NULL;
    if (env != NULL && env->type != FJ_ARRAY)
        return xf_say(XF_ERR, "process.env is not a list");
    for (size_t i = 0; env != NULL && i < env->n; i++)
        if (env->items[i]->type == FJ_STRING && env->items[i]->has_nul)
            return xf_say(XF_ERR, "process.env: an entry with NUL");
    for (size_t k = 0; k < ix->n; k++) { /* sorted by kind */
        const fj *vars = fj_get(fj_get(ix->items[k].json, "selection"), "env");
        for (size_t i = 0; vars != NULL && vars->type == FJ_ARRAY && i < vars->n; i++) {
            const fj *var = vars->items[i];
            const char *value;
            size_t vlen;
            if (fj_str(var) == NULL || !env_lookup(env, var->str, var->len, &value, &vlen))
                continue;
            if (parse_value(ix->items[k].kind, ix->items[k].json, var->str, value, vlen, &out) != XF_OK)
                return XF_ERR;
            break; /* the first variable of a kind that is set decides */
        }
    }
    if (xf_annotation_names(ann_state, ann_config, &out) != XF_OK)
        return XF_ERR;
    *names = (const char **)out.list.v;
    *n = out.list.n;
    return XF_OK;
}
