/* Internal to selection (hook_index.c loads the hook indexes and answers
 * these look-ups; selection.c reads selection values with them). */
#ifndef XF_HOOK_INDEX_H
#define XF_HOOK_INDEX_H
#include "lib/json.h"

/* A card index: 1 to 6 ASCII digits, into *out. */
int card_index(const char *s, size_t n, long *out);
/* Whether the string word is s[0:n] (ASCII case folded when fold). */
int word_is(const fj *word, const char *s, size_t n, int fold);
/* The card an alias token names, from the index's aliases; 1 found. */
int alias_index(const fj *aliases, const char *tok, size_t tlen, int fold, long *out);
/* Whether the token looks like a UUID (the profile's uuid selection). */
int uuid_like(const char *t, size_t n);

#endif
