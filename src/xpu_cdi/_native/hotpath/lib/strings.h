/* String and value helpers of the CDI modules (strings.c): trimming,
 * quoting values for messages, paths, JSON truth and string lists. */
#ifndef XF_STRINGS_H
#define XF_STRINGS_H
#include <stddef.h>

#include "lib/json.h"

#define INDEX_SUFFIX ".xpu-cdi" /* the hook index beside a spec */

/* s[0:*n] without leading and trailing ASCII whitespace (" \t\n\v\f\r"), in place. */
void xf_strip_space(const char **s, size_t *n);
int xf_is_ascii(const char *s, size_t n);
int xf_ends_with(const char *s, const char *suffix);
/* d/name for a plain name (one "/" between them). */
char *xf_path_join(const char *d, const char *name);
/* Whether a parsed JSON value says something: absent (NULL), null, false,
 * a zero number, "", [] and {} do not. */
int fj_truthy(const fj *v);
/* Absent (NULL, read as no strings) or a list of strings: the index's
 * selection word lists, a spec's env. */
int fj_strings_or_absent(const fj *v);
/* strcmp of two char * array elements, for qsort. */
int xf_strcmp_ptr(const void *a, const void *b);

/* s[0:n] as every message shows a value: in single quotes (double ones
 * when it holds a ' and no "), backslash and that quote escaped by a
 * backslash, \n \r \t as such, any other control or non-ASCII byte as
 * \xNN, so a value never breaks the one-line message; xf_quoted_short cuts a
 * value over 100 bytes to its first 60 and says how long it was (values
 * come from containers and may be huge). */
char *xf_quoted(const char *s, size_t n);
char *xf_quoted_short(const char *s, size_t n);

#endif
