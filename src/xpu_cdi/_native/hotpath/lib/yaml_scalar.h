/* Internal to the YAML loader (yaml_load.c): plain scalars typed as
 * go-yaml v2 resolves them (yaml_scalar.c), as the CDI Go library reads YAML. */
#ifndef XF_YAML_SCALAR_H
#define XF_YAML_SCALAR_H
#include "lib/tree_build.h"
#include "lib/json.h"

enum kind { K_NULL, K_BOOL, K_INT, K_UINT, K_FLOAT, K_STR };

struct scalar {
    enum kind kind;
    int b;
    long long i;
    unsigned long long u;
    double d;
};

/* Whether the plain scalar s[0:len] can be anything but a string: empty, or
 * starting as a number or one of go-yaml v2's words do.  Most of a spec
 * (paths, names, keys) is not, and is typed by this one look. */
extern const unsigned char fy_typed_start[256];
static inline int fy_may_be_typed(const char *s, size_t len)
{
    return len == 0 || fy_typed_start[(unsigned char)s[0]];
}

/* Type the plain scalar s[0:len]; 0, or -1 with *why (not representable). */
int resolve_plain(const char *s, size_t len, struct scalar *out, const char **why);
/* The tree node of a scalar (as_string: a CDI spec's string field). */
fj *scalar_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, int as_string);
/* A node of text[0:len], NUL-terminated and kept (not copied): it must outlive the tree.
 * may_hold_nul: 0 where text cannot contain U+0000 (libyaml's reader refuses it, so only
 * a double-quoted scalar's escape makes one), which saves looking. */
fj *text_kept(struct xf_arena *a, enum fj_type type, const char *text, size_t len, int may_hold_nul);
/* A mapping key as a string node ("1", "true"); NULL with *why. */
fj *key_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, const char **why);
/* Whether key names a CDI spec field that keeps its number/boolean type. */
int typed_field(const char *key);

#endif
