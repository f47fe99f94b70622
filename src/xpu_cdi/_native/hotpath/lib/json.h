/* The binaries' JSON tree: every input they read (the OCI state,
 * config.json, hook indexes, CDI specs, the node config) parsed into it by
 * yajl (json_parse.c) or libyaml (yaml_load.c), looked up, compared and
 * edited here (json_tree.c, json_set.c), written by yajl (json_write.c).
 * The parsers are strict, numbers keep their text and one equality rule
 * serves every comparison: docs/architecture.md, "Parsers". */
#ifndef XF_JSON_H
#define XF_JSON_H
#include "lib/common.h"
#include <stdint.h>

/* Nesting limit of parsed documents: config.json and CDI specs nest about
 * 6 deep; yajl's writer stops at 127, which leaves room for our edits. */
#define FJ_MAX_DEPTH 100
#define FJ_MAX_BYTES ((size_t)64 << 20)

enum fj_type { FJ_NULL, FJ_FALSE, FJ_TRUE, FJ_NUMBER, FJ_STRING, FJ_ARRAY, FJ_OBJECT };

typedef struct fj fj;
struct fj {
    enum fj_type type;
    const char *str;   /* FJ_STRING: decoded UTF-8, NUL-terminated; FJ_NUMBER: the number's text */
    size_t len;        /* bytes of str, without the terminator */
    int has_nul;       /* FJ_STRING: the decoded text contains U+0000 (fj_str refuses it) */
    int is_int;        /* FJ_NUMBER: an integer (no fraction/exponent) that fits in long long */
    long long num;     /* FJ_NUMBER with is_int: its value */
    size_t n, cap;     /* FJ_ARRAY / FJ_OBJECT: members */
    fj **items;        /* member values */
    fj **keys;         /* FJ_OBJECT: member keys (FJ_STRING nodes), parallel to items */
};

/* Parse exactly one JSON document (surrounding whitespace allowed).
 * NULL on any error, with a one-line description in err ("duplicate key
 * "a" at line 3, column 9 (byte 41)"). */
fj *fj_parse(const char *text, size_t len, char *err, size_t errlen);

/* Member *key* of an object (keys are unique); NULL when absent or obj is
 * not an object. */
fj *fj_get(const fj *obj, const char *key);

/* The decoded text of a string without NUL, else NULL (not a string, or NUL inside). */
const char *fj_str(const fj *v);

/* Whether v is a string equal to (resp. starting with) s[0:n]. */
int fj_str_eq(const fj *v, const char *s, size_t n);
int fj_str_starts(const fj *v, const char *prefix, size_t n);

/* Deep equality of two JSON values, one rule for every comparison the
 * binaries make (linux.devices rules, hooks, additionalGids, the merged
 * hooks of CDI edits, the fuzzers' round trips):
 *   - the same type: true, false, null, numbers, strings, arrays and
 *     objects are never equal to one another (1 is not true, "1" is not 1);
 *   - numbers: two integers within the signed 64-bit range by value (so 0
 *     and -0 are equal); any other number (a fraction, an exponent, an
 *     integer beyond 64 bits) by its source text, so 1 and 1.0 differ:
 *     where the OCI schema wants an integer, the edits refuse the other;
 *   - strings byte for byte; arrays item by item, in order;
 *   - objects: the same members in any order.  Keys are unique (the
 *     parsers refuse duplicates and fj_set replaces), so there is no
 *     question of which duplicate counts. */
int fj_equal(const fj *a, const fj *b);

/* A set of values under fj_equal (json_set.c), hashed: membership in
 * constant time where a scan would make the wrapper quadratic in the cards.
 * Zero-initialised is empty; values are borrowed, never copied. */
struct fj_valset {
    const fj **slots;
    uint64_t *hashes;
    size_t cap, n;
};
uint64_t fj_hash(const fj *v);                          /* equal values hash alike */
int fj_valset_has(const struct fj_valset *s, const fj *v);
int fj_valset_add(struct fj_valset *s, const fj *v);    /* 1 added, 0 already there (or v NULL) */
void fj_valset_free(struct fj_valset *s);

/* Building and editing (the wrapper edits config.json in place). */
fj *fj_new(enum fj_type type);            /* null/false/true/empty array/empty object */
fj *fj_new_str(const char *s);            /* a string (escaped when serialised) */
fj *fj_new_int(long long v);
void fj_append(fj *array, fj *item);
void fj_set(fj *obj, const char *key, fj *value); /* replace the last member *key*, else append */
/* Member *key* of obj when it is an object (resp. array); else set it to a new empty one. */
fj *fj_object_at(fj *obj, const char *key);
fj *fj_array_at(fj *obj, const char *key);

/* Compact serialisation by yajl's generator: numbers as their text,
 * strings escaped as yajl does (", \\, control characters; UTF-8 kept as
 * is), bytes that are not UTF-8 written as U+FFFD.  fj_dump returns 0, or
 * -1 with err set (a tree nested deeper than yajl writes); fj_write aborts
 * there instead (no parsed tree is that deep). */
int fj_dump(const fj *v, struct xf_buf *out, char *err, size_t errlen);
void fj_write(const fj *v, struct xf_buf *out);

/* For the loaders (json_parse.c, yaml_load.c): line and column (from 1) of byte at
 * of text; the one-line "duplicate key "..."" message for key. */
void fj_position(const char *text, size_t at, size_t *line, size_t *column);
void fj_dup_message(const fj *key, char *buf, size_t size);

#endif
