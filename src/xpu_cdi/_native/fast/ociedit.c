/* xpu-container-runtime's config.json editing: see ociedit.h.  An unusual
 * value where the edit needs a known shape (a non-string where a string
 * belongs, a float number) is refused with one line, never guessed at. */
#include "ociedit.h"
#include "privileged.h"
#include "request_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LD_VAR "LD_LIBRARY_PATH"
#define TMP_MARK ".xpu-cdi-tmp"                  /* atomic.TMP_MARK */
/* real config.json files are 5-50 KB; as in the hook's front end (hook_main.c) */
#define XF_PARSE_MAX_CONFIG_BYTES ((size_t)4 << 20) /* as the hook reads config.json (ocistate.h) */
#define MAX_INDEX_TEXT ((size_t)1 << 20)         /* bundle.selection_names reads this much */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


static const char *const hook_stages[] = {"prestart", "createRuntime", "createContainer",
                                          "startContainer", "poststart", "poststop"};

/* ---- wrapper.py: arguments, spec dirs, the real runtime -------------- */

/* runc's and crun's global options that take the next argument (_VALUE_OPTIONS) */
static int takes_value(const char *arg)
{
    static const char *const opts[] = {"--root", "--log", "--log-format", "--criu", "--rootless",
                                       "--cgroup-manager", "--log-level", "-root", "-log", "-log-format"};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
        if (strcmp(arg, opts[i]) == 0)
            return 1;
    return 0;
}

int xf_split_command(int nargs, char *const *args, const char **command)
{
    int i = 0;

    *command = NULL;
    while (i < nargs) {
        const char *arg = args[i];
        if (strcmp(arg, "--") == 0) {
            if (i + 1 >= nargs)
                return -1;
            *command = args[i + 1];
            return i + 1;
        }
        if (arg[0] != '-') {
            *command = arg;
            return i;
        }
        i += takes_value(arg) ? 2 : 1;
    }
    return -1;
}

const char *xf_option_value(int nargs, char *const *args, int start, const char *const *names, size_t nnames)
{
    for (int i = start < 0 ? 0 : start; i < nargs; i++) {
        const char *arg = args[i];
        if (strcmp(arg, "--") == 0)
            return NULL;
        for (size_t k = 0; k < nnames; k++) {
            size_t n = strlen(names[k]);
            if (strcmp(arg, names[k]) == 0 && i + 1 < nargs)
                return args[i + 1];
            if (strncmp(arg, names[k], n) == 0 && arg[n] == '=')
                return arg + n + 1;
        }
    }
    return NULL;
}

size_t xf_spec_dirs(const char *value, const char ***dirs)
{
    size_t n = 0, cap = 2;
    const char **out = xf_alloc(cap * sizeof(*out));
    const char *p = value ? value : "";

    while (*p != '\0') {
        const char *end = strchrnul(p, ':');
        if (end > p) {
            if (n == cap)
                out = xf_realloc(out, (cap *= 2) * sizeof(*out));
            out[n++] = xf_strndup(p, (size_t)(end - p));
        }
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        out[n++] = "/etc/cdi";
        out[n++] = "/var/run/cdi";
    }
    *dirs = out;
    return n;
}

/* wrapper._executable: a regular file (after symlinks) we may execute */
static int executable(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The real paths that are this wrapper: the binary and its Python half. */
struct selves {
    const char *self;
    int known;
    char *me, *me_py;
};

/* 1 when path is a copy of the wrapper, 0 when not, -1 when its real path
 * cannot be found (Python's non-strict realpath would still answer). */
static int is_self(struct selves *s, const char *path)
{
    char *real;
    int same;

    if (!s->known) {
        s->known = 1;
        s->me = realpath(s->self, NULL);
        if (s->me != NULL)
            s->me_py = realpath(xf_printf("%s.py", s->me), NULL);
    }
    if (s->me == NULL)
        return -1;
    real = realpath(path, NULL);
    if (real == NULL)
        return -1;
    same = strcmp(real, s->me) == 0 || (s->me_py != NULL && strcmp(real, s->me_py) == 0);
    free(real);
    return same;
}

int xf_find_runtime(const char *runtime_env, const char *path_env, const char *self, const char **out)
{
    struct selves s = {.self = self};
    const char *name = runtime_env && *runtime_env ? runtime_env : "runc";
    const char *p;

    if (strchr(name, '/') != NULL) {
        if (!executable(name))
            return xf_say(XF_ERR, "XPU_CDI_RUNTIME='%s' is not an executable file: point it at runc or crun", name);
        if (is_self(&s, name) != 0)
            return xf_say(XF_ERR, "XPU_CDI_RUNTIME='%s' is this wrapper (or its real path is unknown): point it at runc or crun", name);
        *out = name;
        return XF_OK;
    }
    p = path_env && *path_env ? path_env : DEFAULT_PATH;
    for (;;) {
        const char *end = strchrnul(p, ':');
        size_t n = (size_t)(end - p);
        /* os.path.join(d or ".", name) */
        const char *cand = n == 0 ? xf_printf("./%s", name)
                         : p[n - 1] == '/' ? xf_printf("%.*s%s", (int)n, p, name)
                                           : xf_printf("%.*s/%s", (int)n, p, name);
        if (executable(cand)) {
            int me = is_self(&s, cand);
            if (me < 0)
                return xf_say(XF_ERR, "cannot tell whether '%s' is this wrapper (its real path is unknown): set XPU_CDI_RUNTIME to "
                                  "the runtime's absolute path", cand);
            if (me == 0) {
                *out = cand;
                return XF_OK;
            }
        }
        if (*end == '\0')
            break;
        p = end + 1;
    }
    return xf_say(XF_ERR, "no '%s' found on PATH (%s): install it or set XPU_CDI_RUNTIME to the runtime's absolute "
                  "path", name, path_env && *path_env ? path_env : DEFAULT_PATH);
}

/* ---- bundle.py: may_request ------------------------------------------ */

static int name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

struct span {
    const char *p;
    size_t n;
};

static int span_cmp(const void *x, const void *y)
{
    const struct span *a = x, *b = y;
    int c = memcmp(a->p, b->p, a->n < b->n ? a->n : b->n);

    if (c != 0)
        return c;
    return a->n < b->n ? -1 : a->n > b->n;
}

/* The identifiers NAME of every `"NAME=` in data, sorted, distinct.
 * `"NAME=` occurs in data exactly when NAME is the whole run of name
 * characters after some '"' and '=' follows it ('=' is not one of them),
 * so one pass finds every name bundle.may_request could match. */
static size_t config_names(const char *data, size_t len, struct span **out)
{
    const char *p = data, *end = data + len;
    struct span *v = NULL;
    size_t n = 0, cap = 0, k, m;

    while (p < end && (p = memchr(p, '"', (size_t)(end - p))) != NULL) {
        const char *s = ++p;
        while (p < end && name_char((unsigned char)*p))
            p++;
        if (p > s && p < end && *p == '=') {
            if (n == cap)
                v = xf_realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
            v[n].p = s;
            v[n++].n = (size_t)(p - s);
        }
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), span_cmp);
    for (k = 0, m = 0; k < n; k++)  /* drop repeats */
        if (m == 0 || span_cmp(&v[k], &v[m - 1]) != 0)
            v[m++] = v[k];
    *out = v;
    return m;
}

static int has_name(const struct span *names, size_t n, const char *p, size_t len)
{
    struct span key = {p, len};

    return n > 0 && bsearch(&key, names, n, sizeof(*names), span_cmp) != NULL;
}

/* The first MAX_INDEX_TEXT bytes of a file (f.read(1 << 20)); NULL when
 * it cannot be opened or read (selection_names skips it). */
static char *read_head(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    char *buf;
    size_t got = 0;

    if (fd < 0)
        return NULL;
    buf = xf_alloc(MAX_INDEX_TEXT + 1);
    while (got < MAX_INDEX_TEXT) {
        ssize_t r = read(fd, buf + got, MAX_INDEX_TEXT - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return buf;
}

/* Whether an index's text holds, between two '"' (or the text's ends),
 * a token that is one of names (bundle.selection_names' tokens). */
static int index_mentions(const char *text, size_t len, const struct span *names, size_t n)
{
    const char *p = text, *end = text + len;

    for (;;) {
        const char *q = memchr(p, '"', (size_t)(end - p));
        const char *stop = q ? q : end;
        size_t i;
        for (i = 0; p + i < stop && name_char((unsigned char)p[i]); i++)
            ;
        if (i > 0 && p + i == stop && has_name(names, n, p, i))
            return 1;
        if (q == NULL)
            return 0;
        p = q + 1;
    }
}

int xf_may_request(const char *data, size_t len, const char *const *dirs, size_t ndirs)
{
    struct span *names;
    size_t n = 0;

    if (memmem(data, len, "cdi.k8s.io", 10) != NULL)
        return 1;
    n = config_names(data, len, &names);
    if (n == 0)
        return 0;
    /* the profiles' known selection variables are in every index's text
     * (knownSelection), so the scan below sees them too */
    for (size_t d = 0; d < ndirs; d++) {
        DIR *dir = opendir(dirs[d]);
        struct dirent *e;
        if (dir == NULL)
            continue;
        while ((e = readdir(dir)) != NULL) {
            size_t nl = strlen(e->d_name), tl;
            char *text;
            int hit;
            if (nl < 8 || strcmp(e->d_name + nl - 8, ".xpu-cdi") != 0)
                continue;
            text = read_head(xf_printf("%s/%s", dirs[d], e->d_name), &tl);
            if (text == NULL)
                continue;
            hit = index_mentions(text, tl, names, n);
            free(text);
            if (hit) {
                closedir(dir);
                return 1;
            }
        }
        closedir(dir);
    }
    return 0;
}

/* ---- ociedit.py: apply ------------------------------------------------ */

/* obj.get(key), None (JSON null) included in "absent" as Python's
 * `x.get(key) is None` tests do. */
static fj *getv(const fj *obj, const char *key)
{
    fj *v = fj_get(obj, key);

    return v != NULL && v->type == FJ_NULL ? NULL : v;
}

static int str_eq(const fj *v, const char *s, size_t n)
{
    return v != NULL && v->type == FJ_STRING && v->len == n && memcmp(v->str, s, n) == 0;
}

static int str_starts(const fj *v, const char *prefix, size_t n)
{
    return v != NULL && v->type == FJ_STRING && v->len >= n && memcmp(v->str, prefix, n) == 0;
}

static int int_or_absent(const fj *v)
{
    return v == NULL || (v->type == FJ_NUMBER && v->is_int);
}

/* Keep the items of array a for which drop(item, arg) is 0, in order
 * (Python's `current[:] = [c for c in current if ...]`). */
static void keep_unless(fj *a, int (*drop)(const fj *item, const void *arg), const void *arg)
{
    size_t m = 0;

    for (size_t i = 0; i < a->n; i++)
        if (!drop(a->items[i], arg))
            a->items[m++] = a->items[i];
    a->n = m;
}

static int contains(const fj *a, const fj *v)
{
    for (size_t i = 0; i < a->n; i++)
        if (fj_equal(a->items[i], v))
            return 1;
    return 0;
}

/* oci_device + cgroup_rule: the linux.devices entry of a CDI deviceNodes
 * entry and its allow rule (*rule NULL for a fifo). */
static int oci_device(const fj *node, fj **dev, fj **rule)
{
    const fj *path = node ? fj_get(node, "path") : NULL;
    fj *typ, *major, *minor, *mode, *uid, *gid, *perm, *d, *r;
    int is_p;

    if (node == NULL || node->type != FJ_OBJECT)
        return xf_say(XF_ERR, "a deviceNodes entry is not an object");
    if (path == NULL || path->type != FJ_STRING || path->len == 0 || path->str[0] != '/')
        return xf_say(XF_ERR, "device node: 'path' is not an absolute path");
    typ = getv(node, "type");
    major = getv(node, "major");
    minor = getv(node, "minor");
    mode = getv(node, "fileMode");
    uid = fj_get(node, "uid"); /* node.get("uid", 0): null stays null */
    gid = fj_get(node, "gid");
    perm = getv(node, "permissions");
    if ((typ != NULL && typ->type != FJ_STRING) || !int_or_absent(major) || !int_or_absent(minor) ||
        !int_or_absent(mode) || !int_or_absent(uid) || !int_or_absent(gid) ||
        (perm != NULL && perm->type != FJ_STRING))
        return xf_say(XF_ERR, "device node %s: a field of an unusual type", path->str);
    is_p = str_eq(typ, "p", 1);
    if (uid == NULL || gid == NULL) {
        /* the owner and group the spec does not give are the host node's
         * (BOUNDARIES contract 1); 0 when there is no host node to ask */
        const fj *host = getv(node, "hostPath");
        const char *hp = fj_str(host != NULL && host->type == FJ_STRING && host->len > 0 ? host : path);
        struct stat st;
        int have = hp != NULL && stat(hp, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode));
        if (uid == NULL)
            uid = fj_new_int(have ? (long long)st.st_uid : 0);
        if (gid == NULL)
            gid = fj_new_int(have ? (long long)st.st_gid : 0);
    }
    if (typ == NULL || mode == NULL || (!is_p && (major == NULL || minor == NULL))) {
        /* read what is missing from the host node (hostPath or else path) */
        const fj *host = getv(node, "hostPath");
        const char *hp;
        const char *kind;
        struct stat st;
        if (host != NULL && host->type != FJ_STRING)
            return xf_say(XF_ERR, "device node %s: hostPath is not a string", path->str);
        hp = fj_str(host != NULL && host->len > 0 ? host : path);
        if (hp == NULL)
            return xf_say(XF_ERR, "device node %s: NUL in a path", path->str);
        if (stat(hp, &st) != 0)
            return xf_say(XF_ERR, "device node %s: cannot stat %s: %s", path->str, hp, strerror(errno));
        kind = S_ISCHR(st.st_mode) ? "c" : S_ISBLK(st.st_mode) ? "b" : S_ISFIFO(st.st_mode) ? "p" : NULL;
        if (kind == NULL)
            return xf_say(XF_ERR, "device node %s: %s is not a device node", path->str, hp);
        if (typ == NULL || typ->len == 0) /* typ or kind */
            typ = fj_new_str(kind);
        if (major == NULL || minor == NULL) {
            major = fj_new_int((long long)major(st.st_rdev));
            minor = fj_new_int((long long)minor(st.st_rdev));
        }
        if (mode == NULL)
            mode = fj_new_int((long long)(st.st_mode & 0777));
        is_p = str_eq(typ, "p", 1);
    }
    d = fj_new(FJ_OBJECT);
    fj_set(d, "path", (fj *)path);
    fj_set(d, "type", typ);
    if (!is_p) {
        fj_set(d, "major", major);
        fj_set(d, "minor", minor);
    }
    fj_set(d, "fileMode", mode);
    fj_set(d, "uid", uid ? uid : fj_new_int(0));
    fj_set(d, "gid", gid ? gid : fj_new_int(0));
    *dev = d;
    *rule = NULL;
    if (is_p)
        return XF_OK;
    r = fj_new(FJ_OBJECT);
    fj_set(r, "allow", fj_new(FJ_TRUE));
    fj_set(r, "type", fj_new_str(str_eq(typ, "b", 1) ? "b" : "c"));
    fj_set(r, "major", major);
    fj_set(r, "minor", minor);
    fj_set(r, "access", perm != NULL && perm->len > 0 ? perm : fj_new_str("rwm"));
    *rule = r;
    return XF_OK;
}

static int same_device_path(const fj *item, const void *arg)
{
    const fj *path = arg;

    return item->type == FJ_OBJECT && str_eq(fj_get(item, "path"), path->str, path->len);
}

static int apply_nodes(fj *config, const struct xf_edits *e)
{
    fj *lx = fj_object_at(config, "linux"); /* not "linux": a predefined macro in gnu11 */
    fj *devices = fj_array_at(lx, "devices");
    fj *rules = fj_array_at(fj_object_at(lx, "resources"), "devices");

    for (size_t i = 0; i < e->nnodes; i++) {
        fj *dev = NULL, *rule = NULL;
        int rv = oci_device(e->nodes[i].json, &dev, &rule);
        if (rv != XF_OK)
            return rv;
        keep_unless(devices, same_device_path, fj_get(dev, "path"));
        fj_append(devices, dev);
        if (rule != NULL && !contains(rules, rule))
            fj_append(rules, rule);
    }
    return XF_OK;
}

/* os.path.normpath (posixpath) of a string that may hold NUL. */
static struct span normpath(const char *p, size_t n)
{
    size_t slashes = 0, ncomp = 0, i = 0, len = 0;
    struct span *comps, out;
    char *buf;

    if (n == 0)
        return (struct span){".", 1};
    if (p[0] == '/')
        slashes = n >= 2 && p[1] == '/' && !(n >= 3 && p[2] == '/') ? 2 : 1;
    comps = xf_alloc((n / 2 + 1) * sizeof(*comps));
    while (i <= n) {
        size_t s = i;
        while (i < n && p[i] != '/')
            i++;
        struct span c = {p + s, i - s};
        i++;
        if (c.n == 0 || (c.n == 1 && c.p[0] == '.'))
            continue;
        int dotdot = c.n == 2 && c.p[0] == '.' && c.p[1] == '.';
        int last_dotdot = ncomp > 0 && comps[ncomp - 1].n == 2 && comps[ncomp - 1].p[0] == '.' &&
                          comps[ncomp - 1].p[1] == '.';
        if (!dotdot || (!slashes && ncomp == 0) || last_dotdot)
            comps[ncomp++] = c;
        else if (ncomp > 0)
            ncomp--;
    }
    buf = xf_alloc(n + 3);
    for (i = 0; i < slashes; i++)
        buf[len++] = '/';
    for (i = 0; i < ncomp; i++) {
        if (i > 0)
            buf[len++] = '/';
        memcpy(buf + len, comps[i].p, comps[i].n);
        len += comps[i].n;
    }
    free(comps);
    if (len == 0)
        return (struct span){".", 1};
    out.p = buf;
    out.n = len;
    return out;
}

/* ociedit._depth: components of the normalised destination (0 when none). */
static size_t mount_depth(const fj *m)
{
    const fj *dst = m->type == FJ_OBJECT ? fj_get(m, "destination") : NULL;
    struct span np;
    size_t depth = 0;

    if (dst == NULL || dst->type != FJ_STRING)
        return 0;
    np = normpath(dst->str, dst->len);
    for (size_t i = 0; i < np.n;) {
        size_t s = i;
        while (i < np.n && np.p[i] != '/')
            i++;
        depth += i > s;
        i++;
    }
    return depth;
}

static int same_destination(const fj *item, const void *arg)
{
    const struct span *want = arg;
    const fj *dst;
    struct span np;

    if (item->type != FJ_OBJECT)
        return 0;
    dst = fj_get(item, "destination");
    /* c.get("destination", ""): absent is "" (checked to be a string before) */
    np = dst != NULL ? normpath(dst->str, dst->len) : normpath("", 0);
    return np.n == want->n && memcmp(np.p, want->p, np.n) == 0;
}

/* oci_mount: the OCI mounts entry of a CDI mount. */
static int oci_mount(const fj *m, fj **out)
{
    const fj *src = m ? fj_get(m, "hostPath") : NULL, *dst = m ? fj_get(m, "containerPath") : NULL;
    const fj *opts = m ? getv(m, "options") : NULL, *typ = m ? getv(m, "type") : NULL;
    fj *options = fj_new(FJ_ARRAY), *o;

    if (m == NULL || m->type != FJ_OBJECT || src == NULL || src->type != FJ_STRING || dst == NULL ||
        dst->type != FJ_STRING || dst->len == 0 || dst->str[0] != '/')
        return xf_say(XF_ERR, "a mount without hostPath or an absolute containerPath");
    if ((opts != NULL && opts->type != FJ_ARRAY) || (typ != NULL && typ->type != FJ_STRING))
        return xf_say(XF_ERR, "mount %s: options or type of an unusual type", dst->str);
    for (size_t i = 0; opts != NULL && i < opts->n; i++)
        fj_append(options, opts->items[i]);
    if (typ == NULL || typ->len == 0) { /* mount.get("type") or ("bind" if ... else None) */
        typ = NULL;
        for (size_t i = 0; i < options->n && typ == NULL; i++)
            if (str_eq(options->items[i], "bind", 4) || str_eq(options->items[i], "rbind", 5))
                typ = fj_new_str("bind");
    }
    o = fj_new(FJ_OBJECT);
    fj_set(o, "destination", (fj *)dst);
    fj_set(o, "source", (fj *)src);
    if (typ != NULL)
        fj_set(o, "type", (fj *)typ);
    fj_set(o, "options", options);
    *out = o;
    return XF_OK;
}

struct ranked {
    size_t depth, pos;
    fj *item;
};

static int ranked_cmp(const void *x, const void *y)
{
    const struct ranked *a = x, *b = y;

    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos; /* list.sort is stable */
}

static int apply_mounts(fj *config, const struct xf_edits *e)
{
    fj *current = fj_array_at(config, "mounts");
    struct ranked *r;

    for (size_t i = 0; i < current->n; i++) {
        const fj *c = current->items[i], *dst = fj_get(c, "destination");
        if (c->type == FJ_OBJECT && dst != NULL && dst->type != FJ_STRING)
            return xf_say(XF_ERR, "config.json: a mount destination is not a string");
    }
    for (size_t i = 0; i < e->nmounts; i++) {
        fj *new = NULL;
        const fj *dst;
        struct span want;
        int rv = oci_mount(e->mounts[i].json, &new);
        if (rv != XF_OK)
            return rv;
        dst = fj_get(new, "destination");
        want = normpath(dst->str, dst->len);
        keep_unless(current, same_destination, &want);
        fj_append(current, new);
    }
    /* parents before children, stable otherwise (always, as Python sorts) */
    if (current->n < 2)
        return XF_OK;
    r = xf_alloc(current->n * sizeof(*r));
    for (size_t i = 0; i < current->n; i++)
        r[i] = (struct ranked){mount_depth(current->items[i]), i, current->items[i]};
    qsort(r, current->n, sizeof(*r), ranked_cmp);
    for (size_t i = 0; i < current->n; i++)
        current->items[i] = r[i].item;
    free(r);
    return XF_OK;
}

/* ociedit._set_env: replace the first entry KEY=..., else append. */
static void set_env(fj *env, const char *entry, size_t keylen)
{
    for (size_t i = 0; i < env->n; i++)
        if (str_starts(env->items[i], entry, keylen + 1)) {
            env->items[i] = fj_new_str(entry);
            return;
        }
    fj_append(env, fj_new_str(entry));
}

struct strlist {
    const char **v;
    size_t n, cap;
};

static int strlist_has(const struct strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return 1;
    return 0;
}

static void strlist_add(struct strlist *l, const char *s)
{
    if (l->n == l->cap)
        l->v = xf_realloc(l->v, (l->cap = l->cap ? 2 * l->cap : 16) * sizeof(*l->v));
    l->v[l->n++] = s;
}

/* Non-empty ':'-separated parts of s, appended to l. */
static void split_dirs(struct strlist *l, const char *s)
{
    while (*s != '\0') {
        const char *end = strchrnul(s, ':');
        if (end > s)
            strlist_add(l, xf_strndup(s, (size_t)(end - s)));
        s = *end ? end + 1 : end;
    }
}

/* ociedit.library_dirs: LD_LIBRARY_PATH entries of the edits' env and the
 * --folder arguments of update-ldcache hooks, first occurrence kept. */
static int library_dirs(const struct xf_edits *e, struct strlist *out)
{
    struct strlist all = {0};

    for (size_t i = 0; i < e->nenv; i++)
        if (strncmp(e->env[i], LD_VAR "=", sizeof(LD_VAR)) == 0)
            split_dirs(&all, e->env[i] + sizeof(LD_VAR));
    for (size_t h = 0; h < e->nhooks; h++) {
        const fj *hook = e->hooks[h].json, *args = hook && hook->type == FJ_OBJECT ? getv(hook, "args") : NULL;
        int ldcache = 0;
        if (args == NULL)
            continue;
        if (args->type != FJ_ARRAY)
            return xf_say(XF_ERR, "a hook's args is not a list");
        for (size_t i = 0; i < args->n && !ldcache; i++)
            ldcache = str_eq(args->items[i], "update-ldcache", 14);
        if (!ldcache)
            continue;
        for (size_t i = 0; i < args->n; i++) {
            const fj *a = args->items[i], *d = NULL;
            if (str_eq(a, "--folder", 8) && i + 1 < args->n)
                d = args->items[i + 1];
            else if (str_starts(a, "--folder=", 9))
                d = a; /* the part after "=" below */
            else
                continue;
            if (fj_str(d) == NULL)
                return xf_say(XF_ERR, "update-ldcache --folder of an unusual value");
            strlist_add(&all, d == a ? d->str + 9 : d->str);
        }
    }
    for (size_t i = 0; i < all.n; i++)
        if (!strlist_has(out, all.v[i]))
            strlist_add(out, all.v[i]);
    free(all.v);
    return XF_OK;
}

static int apply_env(fj *config, const struct xf_edits *e)
{
    fj *env = fj_array_at(fj_object_at(config, "process"), "env");
    struct strlist dirs = {0}, merged = {0};
    const fj *cur = NULL;
    struct xf_buf value = {0};
    int rv;

    for (size_t i = 0; i < e->nenv; i++) {
        const char *eq = strchr(e->env[i], '=');
        size_t keylen = eq ? (size_t)(eq - e->env[i]) : 0;
        if (keylen == 0)
            return xf_say(XF_ERR, "env entry %s: expected KEY=VALUE", e->env[i]);
        if (!(keylen == sizeof(LD_VAR) - 1 && memcmp(e->env[i], LD_VAR, keylen) == 0))
            set_env(env, e->env[i], keylen);
    }
    rv = library_dirs(e, &dirs);
    if (rv != XF_OK || dirs.n == 0)
        return rv;
    for (size_t i = 0; i < env->n; i++) /* _get_env: the last one wins */
        if (str_starts(env->items[i], LD_VAR "=", sizeof(LD_VAR)))
            cur = env->items[i];
    if (cur != NULL && fj_str(cur) == NULL)
        return xf_say(XF_ERR, "config.json: NUL in LD_LIBRARY_PATH");
    if (cur != NULL)
        split_dirs(&merged, cur->str + sizeof(LD_VAR));
    {
        size_t have = merged.n;
        for (size_t i = 0; i < dirs.n; i++) {
            int seen = 0;
            for (size_t k = 0; k < have && !seen; k++)
                seen = strcmp(merged.v[k], dirs.v[i]) == 0;
            if (!seen)
                strlist_add(&merged, dirs.v[i]);
        }
    }
    xf_buf_adds(&value, LD_VAR "=");
    for (size_t i = 0; i < merged.n; i++)
        xf_buf_addf(&value, "%s%s", i ? ":" : "", merged.v[i]);
    set_env(env, value.data, sizeof(LD_VAR) - 1);
    free(dirs.v);
    free(merged.v);
    return XF_OK;
}

static int apply_hooks(fj *config, const struct xf_edits *e)
{
    static const char *const copied[] = {"args", "env", "timeout"};

    for (size_t h = 0; h < e->nhooks; h++) {
        const fj *hook = e->hooks[h].json;
        const fj *stage = hook && hook->type == FJ_OBJECT ? fj_get(hook, "hookName") : NULL;
        const fj *path = hook && hook->type == FJ_OBJECT ? fj_get(hook, "path") : NULL;
        const char *name = NULL;
        fj *oci, *list;
        for (size_t s = 0; s < sizeof(hook_stages) / sizeof(hook_stages[0]) && name == NULL; s++)
            if (str_eq(stage, hook_stages[s], strlen(hook_stages[s])))
                name = hook_stages[s];
        if (name == NULL)
            return xf_say(XF_ERR, "a hook with an unknown hookName");
        if (path == NULL || path->type != FJ_STRING || path->len == 0 || path->str[0] != '/')
            return xf_say(XF_ERR, "a hook whose path is not absolute");
        oci = fj_new(FJ_OBJECT);
        fj_set(oci, "path", (fj *)path);
        for (size_t k = 0; k < sizeof(copied) / sizeof(copied[0]); k++) {
            fj *v = getv(hook, copied[k]);
            if (v != NULL)
                fj_set(oci, copied[k], v);
        }
        list = fj_array_at(fj_object_at(config, "hooks"), name);
        if (!contains(list, oci))
            fj_append(list, oci);
    }
    return XF_OK;
}

static void apply_gids(fj *config, const struct xf_edits *e)
{
    fj *have;

    if (e->ngids == 0)
        return;
    have = fj_array_at(fj_object_at(fj_object_at(config, "process"), "user"), "additionalGids");
    for (size_t i = 0; i < e->ngids; i++) {
        fj *g = fj_new_int(e->gids[i]);
        if (!contains(have, g))
            fj_append(have, g);
    }
}

int xf_apply(fj *config, const struct xf_edits *e)
{
    int rv;

    if (config == NULL || config->type != FJ_OBJECT)
        return xf_say(XF_ERR, "config.json: expected a JSON object");
    if ((rv = apply_nodes(config, e)) != XF_OK || (rv = apply_mounts(config, e)) != XF_OK ||
        (rv = apply_env(config, e)) != XF_OK || (rv = apply_hooks(config, e)) != XF_OK)
        return rv;
    apply_gids(config, e);
    return XF_OK;
}

/* ---- jsondump: what Python writes ----------------------------------- */

static int key_eq(const fj *a, const fj *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static int key_order(const void *x, const void *y, void *arg)
{
    const fj *obj = arg, *a, *b;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    int c;

    a = obj->keys[i];
    b = obj->keys[j];
    c = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);
    if (c == 0)
        c = a->len < b->len ? -1 : a->len > b->len;
    if (c == 0)
        c = i < j ? -1 : i > j;
    return c;
}

/* A dict from json.loads: each key once, where it first appeared, with the
 * value it last had. */
static void collapse_keys(fj *obj)
{
    size_t n = obj->n, *order, m = 0;
    char *drop;
    int dup = 0;

    if (n < 2)
        return;
    order = xf_alloc(n * sizeof(*order));
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof(*order), key_order, obj);
    for (size_t i = 1; i < n && !dup; i++)
        dup = key_eq(obj->keys[order[i]], obj->keys[order[i - 1]]);
    if (!dup) {
        free(order);
        return;
    }
    drop = xf_alloc(n);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && key_eq(obj->keys[order[j + 1]], obj->keys[order[i]]))
            j++;
        obj->items[order[i]] = obj->items[order[j]]; /* order[i] is the first place */
        for (size_t k = i + 1; k <= j; k++)
            drop[order[k]] = 1;
        i = j + 1;
    }
    for (size_t i = 0; i < n; i++)
        if (!drop[i]) {
            obj->keys[m] = obj->keys[i];
            obj->items[m++] = obj->items[i];
        }
    obj->n = m;
    free(order);
    free(drop);
}

static int finish(fj *v)
{
    int rv;

    switch (v->type) {
    case FJ_NUMBER:
        /* float('1e400') is inf, which jsondump refuses to write */
        if (!v->is_int && v->str != NULL && strpbrk(v->str, ".eE") != NULL && isinf(strtod(v->str, NULL)))
            return xf_say(XF_ERR, "a number too large for a float: %.40s", v->str);
        return XF_OK;
    case FJ_OBJECT:
        collapse_keys(v);
        /* fall through */
    case FJ_ARRAY:
        for (size_t i = 0; i < v->n; i++)
            if ((rv = finish(v->items[i])) != XF_OK)
                return rv;
        return XF_OK;
    default:
        return XF_OK;
    }
}

int xf_serialise(fj *config, struct xf_buf *out)
{
    int rv = finish(config);

    if (rv != XF_OK)
        return rv;
    fj_write(config, out);
    return XF_OK;
}

/* ---- atomic.write_atomic(durable=False) ------------------------------ */

int xf_write_atomic(const char *path, const char *data, size_t len, unsigned mode)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    char *tmp = xf_printf("%.*s.%s.%ld" TMP_MARK, (int)dirlen, path, path + dirlen, (long)getpid());
    int fd, rv;
    size_t done = 0;

    /* O_EXCL: never write through a file we did not create (a temp file
     * of a killed writer with our pid: refused, it is not ours) */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
    if (fd < 0)
        return xf_say(XF_ERR, "cannot write '%s': cannot create '%s': %s", path, tmp, strerror(errno));
    if (fchmod(fd, mode & 07777) != 0) /* O_CREAT's mode went through the umask */
        goto fail;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto fail;
        if (w == 0) {
            errno = EIO;
            goto fail;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    return XF_OK;
fail:
    rv = xf_say(XF_ERR, "cannot write '%s' (through '%s'): %s", path, tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rv;
}

/* ---- wrapper.prepare -------------------------------------------------- */

/* wrapper._unserved: a known selection variable (knownSelection of the
 * indexes, which generate writes from the profiles; the last index wins on
 * a repeated variable, variables in sorted order), set to something other
 * than a "none" value, for a kind no index serves: refused, since the
 * container would start without the cards it asked for. */
struct known {
    const char *var, *kind;
};

static int cmp_known(const void *a, const void *b)
{
    return strcmp(((const struct known *)a)->var, ((const struct known *)b)->var);
}

static int unserved(const fj *env, const struct xf_indexes *ix, const char *where)
{
    struct known *known = NULL;
    size_t nknown = 0;

    for (size_t i = 0; env != NULL && i < ix->n; i++) {
        const fj *ks = fj_get(ix->items[i].json, "knownSelection");
        for (size_t j = 0; ks != NULL && ks->type == FJ_OBJECT && j < ks->n; j++) {
            const char *var = fj_str(ks->keys[j]), *kind = fj_str(ks->items[j]);
            size_t at = nknown;
            if (var == NULL || kind == NULL)
                continue;
            for (size_t k = 0; k < nknown; k++)
                if (strcmp(known[k].var, var) == 0)
                    at = k;
            if (at == nknown)
                known = xf_realloc(known, ++nknown * sizeof(*known));
            known[at].var = var;
            known[at].kind = kind;
        }
    }
    if (nknown > 1)
        qsort(known, nknown, sizeof(*known), cmp_known);
    for (size_t k = 0; k < nknown; k++) {
        const char *var = known[k].var;
        size_t vl = strlen(var), n;
        const fj *found = NULL;
        const char *s;
        int served = 0;
        for (size_t i = 0; i < env->n; i++) /* env_map: the last entry wins */
            if (str_starts(env->items[i], var, vl) && env->items[i]->str[vl] == '=')
                found = env->items[i];
        if (found == NULL)
            continue;
        for (size_t i = 0; i < ix->n && !served; i++)
            served = strcmp(ix->items[i].kind, known[k].kind) == 0;
        if (served)
            continue;
        /* str.strip() of the value: ASCII whitespace only here; anything
         * else left (Unicode spaces too) counts as a request */
        s = found->str + vl + 1;
        n = found->len - vl - 1;
        while (n > 0 && (strchr(" \t\n\v\f\r\x1c\x1d\x1e\x1f", s[0]) != NULL && s[0] != '\0'))
            s++, n--;
        while (n > 0 && (strchr(" \t\n\v\f\r\x1c\x1d\x1e\x1f", s[n - 1]) != NULL && s[n - 1] != '\0'))
            n--;
        if (!(n == 0 || (n == 4 && (memcmp(s, "void", 4) == 0 || memcmp(s, "none", 4) == 0))))
            return xf_say(XF_ERR, "%s=%s asks for %s devices but no spec in %s defines that kind (with its .xpu-cdi "
                          "index): run `xpu-cdi generate` on this node", var, rq_short(s, n), known[k].kind, where);
    }
    return XF_OK;
}

/* The dirs as XPU_CDI_SPEC_DIRS spells them, for messages. */
static const char *joined(const char *const *dirs, size_t ndirs)
{
    struct xf_buf b = {0};

    xf_buf_adds(&b, "");
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&b, "%s%s", i ? ":" : "", dirs[i]);
    return b.data;
}

int xf_prepare(const char *bundle, const char *const *dirs, size_t ndirs, const struct xf_config *cfg, int *edited,
               const char **ignored)
{
    size_t bl = strlen(bundle), len, nnames;
    const char *path = bl > 0 && bundle[bl - 1] == '/' ? xf_printf("%sconfig.json", bundle)
                                                       : xf_printf("%s/config.json", bundle);
    const fj *process, *env, *ann;
    const char **names;
    char *data, err[256];
    unsigned mode;
    fj *config;
    struct xf_indexes ix;
    struct xf_edits edits;
    struct xf_buf out = {0};
    int rv;

    *edited = 0;
    *ignored = NULL;
    if (xf_read_file(path, XF_MAX_CONFIG_BYTES, &data, &len, &mode) != XF_OK)
        return xf_say(XF_ERR, "%s: is --bundle right?", xf_strdup(xf_reason));
    if (!xf_may_request(data, len, dirs, ndirs))
        return XF_OK; /* the common case: no JSON parsed, nothing written */
    if (len > XF_PARSE_MAX_CONFIG_BYTES) /* the tree costs up to ~50x the text */
        return xf_say(XF_ERR, "'%s' is larger than %zu bytes: refusing to parse it", path,
                      XF_PARSE_MAX_CONFIG_BYTES);
    config = fj_parse(data, len, err, sizeof(err));
    if (config == NULL)
        return xf_say(XF_ERR, "'%s' is not valid JSON: %s", path, err);
    if (config->type != FJ_OBJECT)
        return xf_say(XF_ERR, "'%s': expected a JSON object", path);
    process = fj_get(config, "process");
    env = process != NULL && process->type == FJ_OBJECT ? fj_get(process, "env") : NULL;
    if (env != NULL && env->type != FJ_ARRAY)
        env = NULL; /* Python takes it as [] */
    ann = fj_get(config, "annotations");
    if (ann != NULL && ann->type != FJ_OBJECT)
        ann = NULL;
    if ((rv = xf_load_indexes(dirs, ndirs, &ix)) != XF_OK)
        return rv;
    if (!cfg->accept_env_when_unprivileged && !xf_privileged(config) && (*ignored = xf_selection_var(&ix, env)))
        env = NULL; /* the node's setting: only annotations select for an unprivileged container */
    if (xf_requested(&ix, env, NULL, ann, &names, &nnames) != XF_OK)
        return xf_say(XF_ERR, "%s (spec dirs searched: %s)", xf_strdup(xf_reason), joined(dirs, ndirs));
    if (unserved(env, &ix, joined(dirs, ndirs)) != XF_OK)
        return XF_ERR;
    if (nnames == 0)
        return XF_OK;
    if ((rv = xf_resolve(dirs, ndirs, names, nnames, &edits)) != XF_OK)
        return rv;
    if (edits.unsupported != NULL)
        return xf_say(XF_ERR, "a requested CDI device needs '%s', which xpu-container-runtime does not apply: use a "
                      "CDI-enabled runtime for it", edits.unsupported);
    if ((rv = xf_apply(config, &edits)) != XF_OK || (rv = xf_serialise(config, &out)) != XF_OK ||
        (rv = xf_write_atomic(path, out.data, out.len, mode)) != XF_OK)
        return rv;
    *edited = 1;
    return XF_OK;
}
