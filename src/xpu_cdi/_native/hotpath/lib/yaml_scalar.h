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

/* Type the plain scalar s[0:len]; 0, or -1 with *why (not representable). */
int resolve_plain(const char *s, size_t len, struct scalar *out, const char **why);
/* The tree node of a scalar (as_string: a CDI spec's string field). */
fj *scalar_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, int as_string);
/* A node of text[0:len], NUL-terminated and kept (not copied): it must outlive the tree. */
fj *text_kept(struct xf_arena *a, enum fj_type type, const char *text, size_t len);
/* A mapping key as a string node ("1", "true"); NULL with *why. */
fj *key_node(struct xf_arena *a, const struct scalar *sc, const char *s, size_t len, const char **why);
/* Whether key names a CDI spec field that keeps its number/boolean type. */
int typed_field(const char *key);

#endif
