/* Text checks of the JSON parser (json_parse.c) that yajl does not make:
 * strict UTF-8, lone surrogate escapes, whitespace JSON does not allow;
 * and where a byte is (line, column) for messages.  See json_text.h. */
#include "lib/json_text.h"

#include <stdint.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 0 when it is not one. */
size_t utf8_len(const unsigned char *s, const unsigned char *end)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t n, i;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;       /* overlong below */
        else if (c == 0xED)
            hi = 0x9F;       /* U+D800..U+DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;       /* overlong below */
        else if (c == 0xF4)
            hi = 0x8F;       /* above U+10FFFF */
    } else
        return 0;
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* Whether [s, s+n) is all well-formed UTF-8 (ASCII runs skipped 8 bytes
 * at a time: nearly every string of a spec or config.json is ASCII). */
int utf8_valid(const unsigned char *s, size_t n)
{
    const unsigned char *end = s + n;

    while (s < end) {
        size_t k;
        uint64_t w;
        if (end - s >= 8 && (memcpy(&w, s, 8), (w & 0x8080808080808080u) == 0)) {
            s += 8;
            continue;
        }
        if (*s < 0x80) {
            s++;
            continue;
        }
        if ((k = utf8_len(s, end)) == 0)
            return 0;
        s += k;
    }
    return 1;
}

/* The value of the 4 hex digits at s, -1 when they are not 4 hex digits. */
static long hex4(const char *s, const char *end)
{
    long v = 0;

    if (end - s < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Offset of the first \u escape of a lone surrogate in text, or SIZE_MAX.
 * yajl would decode a lone high one as '?' and pair a high one with any
 * \u escape after it; RFC 8259 leaves them undefined, so we refuse them.
 * An escape starts at a backslash preceded by an even run of them (outside
 * strings a backslash is refused by yajl anyway). */
size_t lone_surrogate(const char *text, size_t len)
{
    const char *s = text, *end = text + len;

    while ((s = memchr(s, '\\', (size_t)(end - s))) != NULL) {
        const char *run = s;
        long hi, lo;
        while (s < end && *s == '\\')
            s++;
        if ((s - run) % 2 == 0 || s == end || *s != 'u')
            continue;
        hi = hex4(s + 1, end);
        if (hi < 0xD800 || hi > 0xDFFF)
            continue;  /* not a surrogate (or bad hex: yajl refuses that) */
        lo = end - s >= 11 && s[5] == '\\' && s[6] == 'u' ? hex4(s + 7, end) : -1;
        if (hi >= 0xDC00 || lo < 0xDC00 || lo > 0xDFFF)
            return (size_t)(run + (s - run) - 1 - text);
        s += 11;  /* a pair */
    }
    return SIZE_MAX;
}

/* Offset of the first form feed or vertical tab, or SIZE_MAX: yajl takes
 * them for whitespace, RFC 8259 does not (and inside a string they are
 * control characters, refused anyway). */
size_t bad_whitespace(const char *text, size_t len)
{
    const char *f = memchr(text, '\f', len), *v = memchr(text, '\v', len);

    if (f == NULL && v == NULL)
        return SIZE_MAX;
    return (size_t)((f == NULL || (v != NULL && v < f) ? v : f) - text);
}

/* ---- positions, shared with the YAML loader (yaml_load.c) ------------- */

/* Line and column (from 1) of byte *at* of text. */
void fj_position(const char *text, size_t at, size_t *line, size_t *column)
{
    const char *nl, *s = text, *end = text + at;

    *line = 1;
    while ((nl = memchr(s, '\n', (size_t)(end - s))) != NULL) {
        (*line)++;
        s = nl + 1;
    }
    *column = (size_t)(end - s) + 1;
}
