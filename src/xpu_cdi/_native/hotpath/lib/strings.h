/* String and value helpers of the CDI modules (strings.c): trimming,
 * quoting values for messages, paths, JSON truth and string lists. */
#ifndef XF_STRINGS_H
#define XF_STRINGS_H
#include <stddef.h>

#include "lib/json.h"

#define INDEX_SUFFIX ".xpu-cdi" /* the hook index beside a spec */

/* str.strip() of s[0:*n] for ASCII text, in place. */
void rq_strip(const char **s, size_t *n);
int rq_is_ascii(const char *s, size_t n);
int rq_ends_with(const char *s, const char *suffix);
/* os.path.join(d, name) for a plain name. */
char *rq_join(const char *d, const char *name);
/* Python's truth value of a parsed JSON value (NULL: absent, false). */
int rq_truthy(const fj *v);
/* Absent (NULL) or a list of strings: sel.get(key, []) in select, the env
 * check of registry._check_edits. */
int rq_string_list(const fj *v);
/* strcmp of two char * array elements, for qsort. */
int rq_cmp_str(const void *a, const void *b);

/* s[0:n] quoted as Python's repr() quotes ASCII text (other bytes as
 * \xNN), the way the tooling's messages show values; rq_short cuts a
 * value over 100 bytes to its first 60 and says how long it was (values
 * come from containers and may be huge). */
char *rq_quoted(const char *s, size_t n);
char *rq_short(const char *s, size_t n);

#endif
