/* The hook indexes (*.xpu-cdi beside the specs, written by `generate`):
 * loaded from the spec dirs by kind, later dirs winning; the card and
 * alias look-ups selection values use (hook_index.h). */
#include "lib/request.h"
#include "lib/hook_index.h"

#include <stdlib.h>
#include <string.h>

#include "lib/collections.h"
#include "lib/files.h"
#include "lib/strings.h"

#define MAX_INDEX_BYTES ((size_t)1 << 20) /* an index is a few KiB */

/* ---- hook indexes ---------------------------------------------------------- */

/* A card index: 1 to 6 ASCII digits (no sign, no spaces). */
int card_index(const char *s, size_t n, long *out)
{
    long v = 0;

    if (n == 0 || n > 6)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

/* The shape generate writes; an index of another shape is not used. */
static int usable(const fj *d)
{
    const fj *sel, *indices, *all, *aliases, *kind;

    if (d->type != FJ_OBJECT || !fj_equal(fj_get(d, "xpuCdiIndex"), fj_new_int(1)))
        return 0; /* format 1: the integer (json.h's equality: not 1.0, not true) */
    kind = fj_get(d, "kind");
    if (kind == NULL || kind->type != FJ_STRING)
        return 0;
    sel = fj_get(d, "selection");
    indices = fj_get(d, "indices");
    all = fj_get(d, "all");
    if (sel == NULL || sel->type != FJ_OBJECT || indices == NULL || indices->type != FJ_OBJECT)
        return 0;
    if (!(all == NULL || all->type == FJ_NULL || all->type == FJ_STRING))
        return 0;
    for (size_t i = 0; i < indices->n; i++) {
        long unused;
        if (!card_index(indices->keys[i]->str, indices->keys[i]->len, &unused))
            return 0;
        if (indices->items[i]->type != FJ_STRING)
            return 0;
    }
    if (!fj_strings_or_absent(fj_get(sel, "env")) || !fj_strings_or_absent(fj_get(sel, "none")) ||
        !fj_strings_or_absent(fj_get(sel, "all")))
        return 0;
    aliases = fj_get(sel, "aliases");
    if (aliases != NULL && aliases->type == FJ_ARRAY) {
        for (size_t i = 0; i < aliases->n; i++)
            if (aliases->items[i]->type != FJ_STRING || aliases->items[i]->len == 0)
                return 0;
    } else if (!(aliases == NULL || aliases->type == FJ_NULL || aliases->type == FJ_STRING)) {
        return 0; /* a string: an index written before aliases were prefixes (its alias tokens are refused) */
    }
    {
        const fj *fold = fj_get(sel, "ignoreCase"), *uuids = fj_get(sel, "uuidsFrom");
        if (fold != NULL && fold->type != FJ_TRUE && fold->type != FJ_FALSE)
            return 0;
        return uuids == NULL || uuids->type == FJ_NULL || uuids->type == FJ_STRING;
    }
}

/* A word of the index (none/all values, alias prefixes) against text, ASCII
 * case folded when the profile says so. */
int word_is(const fj *word, const char *s, size_t n, int fold)
{
    if (word == NULL || word->type != FJ_STRING || word->len != n)
        return 0;
    return fold ? strncasecmp(word->str, s, n) == 0 : memcmp(word->str, s, n) == 0;
}

/* The card index of an alias token: one of the profile's prefixes, then 1
 * to 6 digits (Ascend910-0, npu-3). */
int alias_index(const fj *aliases, const char *tok, size_t tlen, int fold, long *out)
{
    for (size_t i = 0; aliases != NULL && aliases->type == FJ_ARRAY && i < aliases->n; i++) {
        const fj *p = aliases->items[i];
        if (p->len < tlen && word_is(p, tok, p->len, fold) && card_index(tok + p->len, tlen - p->len, out))
            return 1;
    }
    return 0;
}

/* A chip UUID as vendor device plugins send them: 8-4-4-4-12 hex digits
 * after an optional "<letters>-" prefix. */
int uuid_like(const char *t, size_t n)
{
    static const size_t groups[] = {8, 4, 4, 4, 12};
    size_t dashes = 0, start = 0, g = 0;

    for (size_t i = 0; i < n; i++)
        dashes += t[i] == '-';
    if (dashes == 5) { /* the prefix */
        while (start < n && ((t[start] >= 'a' && t[start] <= 'z') || (t[start] >= 'A' && t[start] <= 'Z')))
            start++;
        if (start == 0 || start >= n || t[start] != '-')
            return 0;
        start++;
    } else if (dashes != 4) {
        return 0;
    }
    for (size_t i = start; g < 5; g++) {
        size_t len = 0;
        while (i + len < n && t[i + len] != '-') {
            if (!strchr("0123456789abcdefABCDEF", t[i + len]))
                return 0;
            len++;
        }
        if (len != groups[g])
            return 0;
        i += len + 1;
        if (g == 4)
            return i - 1 == n;
    }
    return 0;
}

static int cmp_index(const void *a, const void *b)
{
    return strcmp(((const struct xf_index *)a)->kind, ((const struct xf_index *)b)->kind);
}

int xf_load_indexes(const char *const *dirs, size_t ndirs, struct xf_indexes *out)
{
    struct xf_strmap by_kind = {0};
    struct xf_ptrvec kinds = {0};

    out->items = NULL;
    out->n = 0;
    for (size_t di = 0; di < ndirs; di++) {
        char **names;
        size_t n;
        if (xf_list_dir(dirs[di], &names, &n) != 0)
            continue; /* a dir that cannot be listed (absent, not a dir) holds no index */
        for (size_t i = 0; i < n; i++) {
            char *path, *data, err[256];
            size_t len;
            struct stat st;
            const fj *doc, *kind;
            if (!xf_ends_with(names[i], INDEX_SUFFIX))
                continue;
            path = xf_path_join(dirs[di], names[i]);
            switch (xf_read_regular(path, MAX_INDEX_BYTES, &data, &len, &st)) {
            case RD_ABSENT: /* removed since the listing */
            case RD_UNREADABLE:
            case RD_REFUSED:
                continue; /* a broken index only disables env selection for its kind */
            }
            doc = fj_parse(data, len, err, sizeof(err));
            if (doc == NULL || !usable(doc))
                continue;
            kind = fj_get(doc, "kind");
            if (fj_str(kind) == NULL)
                continue;
            if (xf_strmap_put(&by_kind, kind->str, (void *)doc) == NULL)
                xf_ptrvec_add(&kinds, kind->str);
        }
    }
    out->items = xf_alloc((kinds.n ? kinds.n : 1) * sizeof(*out->items));
    for (size_t i = 0; i < kinds.n; i++) {
        out->items[i].kind = kinds.v[i];
        out->items[i].json = xf_strmap_get(&by_kind, kinds.v[i]);
    }
    out->n = kinds.n;
    /* by kind, in byte order (for UTF-8 also code point order, as the tooling sorts) */
    if (out->n > 1)
        qsort(out->items, out->n, sizeof(*out->items), cmp_index);
    return XF_OK;
}

/* see hook_index.h */
void xf_prefetch_indexes(const char *const *dirs, size_t ndirs)
{
    for (size_t di = 0; di < ndirs; di++) {
        char **names, *data;
        size_t n, len;
        struct stat st;
        if (xf_list_dir(dirs[di], &names, &n) != 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if (xf_ends_with(names[i], INDEX_SUFFIX))
                (void)xf_read_regular(xf_path_join(dirs[di], names[i]), MAX_INDEX_BYTES, &data, &len, &st);
    }
}
