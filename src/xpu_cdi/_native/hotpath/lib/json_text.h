/* Internal to the JSON parser (json_parse.c): the text checks yajl does
 * not make (json_text.c). */
#ifndef XF_JSON_TEXT_H
#define XF_JSON_TEXT_H
#include "lib/json.h"

/* Length of the well-formed UTF-8 sequence at s (RFC 3629), 0 when it is not one. */
size_t utf8_len(const unsigned char *s, const unsigned char *end);
int utf8_valid(const unsigned char *s, size_t n);
/* Offset of the first \uD800..\uDFFF escape without its pair in text, or SIZE_MAX. */
size_t lone_surrogate(const char *text, size_t len);
/* Offset of the first whitespace byte JSON does not allow, or SIZE_MAX. */
size_t bad_whitespace(const char *text, size_t len);

#endif
