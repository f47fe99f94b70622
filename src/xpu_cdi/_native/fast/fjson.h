/* A small, strict JSON parser with a mutable tree and a serialiser, for
 * the front end's inputs: the OCI state, config.json, our hook indexes and
 * CDI specs.  All of it may be hostile (config.json comes from the pod),
 * so: RFC 8259 only (no NaN/Infinity, no comments, no trailing commas),
 * UTF-8 validated, depth limited, every length checked.  Where Python's
 * json module would accept something this parser refuses (NaN, lone
 * surrogates in \u escapes), the caller defers to Python: refusing is
 * always safe here.
 *
 * Scalars keep their source text (raw), so serialising an unchanged
 * string or number reproduces it byte for byte; containers are always
 * serialised member by member (compact, no spaces). */
#ifndef XF_FJSON_H
#define XF_FJSON_H
#include "common.h"

#define FJ_MAX_DEPTH 256

enum fj_type { FJ_NULL, FJ_FALSE, FJ_TRUE, FJ_NUMBER, FJ_STRING, FJ_ARRAY, FJ_OBJECT };

typedef struct fj fj;
struct fj {
    enum fj_type type;
    const char *raw;   /* FJ_STRING / FJ_NUMBER: source text (with quotes for strings); NULL when built */
    size_t rawlen;
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
 * NULL on any error, with a one-line description in err. */
fj *fj_parse(const char *text, size_t len, char *err, size_t errlen);

/* Member *key* of an object (the last one when a key repeats, as Python's
 * json and Go's encoding/json keep); NULL when absent or obj is not an object. */
fj *fj_get(const fj *obj, const char *key);

/* The decoded text of a string without NUL, else NULL (not a string, or NUL inside). */
const char *fj_str(const fj *v);

/* Deep equality as Python compares parsed values: objects regardless of
 * member order (last duplicate wins), numbers by value. */
int fj_equal(const fj *a, const fj *b);

/* Building and editing (the wrapper edits config.json in place). */
fj *fj_new(enum fj_type type);            /* null/false/true/empty array/empty object */
fj *fj_new_str(const char *s);            /* a string (escaped when serialised) */
fj *fj_new_int(long long v);
void fj_append(fj *array, fj *item);
void fj_insert(fj *array, size_t at, fj *item);
void fj_remove(fj *container, size_t i);  /* array item / object member i */
void fj_set(fj *obj, const char *key, fj *value); /* replace the last member *key*, else append */
/* Member *key* of obj when it is an object (resp. array); else set it to a new empty one. */
fj *fj_object_at(fj *obj, const char *key);
fj *fj_array_at(fj *obj, const char *key);

/* Compact serialisation (as json.dumps(separators=(",", ":")) up to
 * scalar spelling, which is kept from the source). */
void fj_write(const fj *v, struct xf_buf *out);

#endif
