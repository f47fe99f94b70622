/* The helpers select.c, names.c and registry.c share: see request_util.h.
 * Mirrors no Python module of its own -- these are the bits of Python
 * (dict, str.strip, os.listdir, open().read()) the C twins need. */
#include "request_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t map_find(const struct rq_map *m, const char *key)
{
    size_t i = hash_str(key) & (m->cap - 1);

    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *rq_map_get(const struct rq_map *m, const char *key)
{
    return m->cap == 0 ? NULL : m->vals[map_find(m, key)];
}

/* Set key to val (replacing); returns the previous value or NULL. */
void *rq_map_put(struct rq_map *m, const char *key, void *val)
{
    size_t i;
    void *old;

    if ((m->n + 1) * 2 > m->cap) {
        struct rq_map bigger = {NULL, NULL, m->cap ? m->cap * 2 : 16, 0};
        bigger.keys = xf_alloc(bigger.cap * sizeof(*bigger.keys));
        bigger.vals = xf_alloc(bigger.cap * sizeof(*bigger.vals));
        for (i = 0; i < m->cap; i++)
            if (m->keys[i] != NULL) {
                size_t j = map_find(&bigger, m->keys[i]);
                bigger.keys[j] = m->keys[i];
                bigger.vals[j] = m->vals[i];
                bigger.n++;
            }
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    i = map_find(m, key);
    old = m->vals[i];
    if (m->keys[i] == NULL) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return old;
}

void rq_vec_add(struct rq_vec *a, const void *p)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = xf_realloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = p;
}

void rq_names_add(struct rq_names *s, const char *name)
{
    if (rq_map_get(&s->seen, name) == NULL) {
        rq_map_put(&s->seen, name, (void *)name);
        rq_vec_add(&s->list, name);
    }
}

/* Python's str.isspace() for ASCII (str.strip() also strips \x1c-\x1f);
 * non-ASCII text never gets here. */
static int py_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

void rq_strip(const char **s, size_t *n)
{
    while (*n > 0 && py_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && py_space((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

int rq_is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

int rq_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* os.path.join(d, name) for a plain name. */
char *rq_join(const char *d, const char *name)
{
    size_t n = strlen(d);

    if (n == 0 || d[n - 1] == '/')
        return xf_printf("%s%s", d, name);
    return xf_printf("%s/%s", d, name);
}

/* Python's truth value of a parsed JSON value (NULL: absent, false). */
int rq_truthy(const fj *v)
{
    if (v == NULL)
        return 0;
    switch (v->type) {
    case FJ_NULL:
    case FJ_FALSE:
        return 0;
    case FJ_TRUE:
        return 1;
    case FJ_NUMBER:
        /* an integer that overflows long long is never 0; a float is 0 when strtod says so, as float() */
        return v->is_int ? v->num != 0 : strtod(v->str, NULL) != 0;
    case FJ_STRING:
        return v->len > 0;
    case FJ_ARRAY:
    case FJ_OBJECT:
        return v->n > 0;
    }
    return 0;
}

int rq_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* os.listdir, sorted (byte order).  0, or -errno when the dir cannot be listed. */
int rq_list_dir(const char *d, char ***names, size_t *n)
{
    DIR *dir = opendir(d);
    struct dirent *e;
    struct rq_vec v = {0};

    *names = NULL;
    *n = 0;
    if (dir == NULL)
        return -errno;
    for (;;) {
        errno = 0;
        e = readdir(dir);
        if (e == NULL)
            break;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        rq_vec_add(&v, xf_strdup(e->d_name));
    }
    if (errno != 0) {
        int err = errno;
        closedir(dir);
        return -err;
    }
    closedir(dir);
    if (v.n > 0)
        qsort(v.v, v.n, sizeof(*v.v), rq_cmp_str);
    *names = (char **)v.v;
    *n = v.n;
    return 0;
}

/* Up to limit bytes of a regular file (NUL-terminated).  RD_OSERROR where
 * Python's open()/read() raise OSError (a directory too); RD_REFUSED (reason
 * set) for a file larger than limit or of another type (a FIFO would block
 * Python: not ours to decide). */
int rq_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct xf_buf b = {0};
    int rv = RD_OK;

    if (fd < 0) {
        xf_say(XF_ERR, "%s", strerror(errno));
        return RD_OSERROR;
    }
    if (fstat(fd, st) != 0 || S_ISDIR(st->st_mode)) {
        xf_say(XF_ERR, "%s", strerror(S_ISDIR(st->st_mode) ? EISDIR : errno));
        close(fd);
        return RD_OSERROR;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        xf_say(XF_ERR, "not a regular file");
        return RD_REFUSED;
    }
    xf_buf_add(&b, "", 0);
    for (;;) {
        char chunk[65536];
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            xf_say(XF_ERR, "%s", strerror(errno));
            rv = RD_OSERROR;
            break;
        }
        if (got == 0)
            break;
        if (b.len + (size_t)got > limit) {
            xf_say(XF_ERR, "larger than the %zu-byte limit", limit);
            rv = RD_REFUSED;
            break;
        }
        xf_buf_add(&b, chunk, (size_t)got);
    }
    close(fd);
    if (rv != RD_OK) {
        free(b.data);
        return rv;
    }
    *data = b.data;
    *len = b.len;
    return RD_OK;
}

int rq_string_list(const fj *v)
{
    if (v == NULL)
        return 1; /* sel.get(key, []) */
    if (v->type != FJ_ARRAY)
        return 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->type != FJ_STRING)
            return 0;
    return 1;
}

/* see request_util.h */
char *rq_quoted(const char *s, size_t n)
{
    struct xf_buf b = {0};
    char q = memchr(s, '\'', n) != NULL && memchr(s, '"', n) == NULL ? '"' : '\'';

    xf_buf_add(&b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == (unsigned char)q)
            xf_buf_addf(&b, "\\%c", c);
        else if (c == '\n')
            xf_buf_adds(&b, "\\n");
        else if (c == '\r')
            xf_buf_adds(&b, "\\r");
        else if (c == '\t')
            xf_buf_adds(&b, "\\t");
        else if (c < 0x20 || c >= 0x7f)
            xf_buf_addf(&b, "\\x%02x", c);
        else
            xf_buf_add(&b, (const char *)&s[i], 1);
    }
    xf_buf_add(&b, &q, 1);
    return b.data;
}

/* see request_util.h */
char *rq_short(const char *s, size_t n)
{
    if (n <= 100)
        return rq_quoted(s, n);
    return xf_printf("%s... (%zu characters)", rq_quoted(s, 60), n);
}
