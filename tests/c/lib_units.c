/* Table-driven tests of lib/'s pure functions, compiled against the library
 * sources and run by test_lib_units.py (as crun tests libcrun: small
 * programs over the library, one line per case).
 *
 *   lib_units ANNOTATION_VECTORS
 *
 * Prints "ok N - what" or "not ok N - what: why" per case, then "1..N";
 * exits 1 when a case failed. */
#include "lib/cdi_names.h"
#include "lib/cgroup_locate.h"
#include "lib/common.h"
#include "lib/json.h"
#include "lib/yaml.h"
#include "lib/yaml_scalar.h"

#include <stdio.h>
#include <string.h>

static int cases, failed;

static void report(int ok, const char *what, const char *why)
{
    cases++;
    if (ok) {
        printf("ok %d - %s\n", cases, what);
    } else {
        failed++;
        printf("not ok %d - %s: %s\n", cases, what, why);
    }
}

/* ---- the error convention: a reason that names what failed ------------- */

static void test_reason_named(void)
{
    int rv = xf_named(xf_say(XF_ERR, "mount source '%s' is gone", "/x"));
    report(rv == XF_ERR && xf_reason_named && strcmp(xf_reason, "mount source '/x' is gone") == 0,
           "xf_named marks the reason it returns", xf_reason);
    xf_append(XF_ERR, " (hint)");
    report(xf_reason_named, "xf_append keeps the mark", xf_reason);
    xf_wrap(XF_ERR, "step");
    report(!xf_reason_named && strcmp(xf_reason, "step: mount source '/x' is gone (hint)") == 0,
           "xf_wrap clears the mark", xf_reason);
    xf_named(XF_ERR);
    xf_say(XF_ERR, "mknod: %s", "EPERM");
    report(!xf_reason_named, "xf_say clears the mark", xf_reason);
}

/* ---- the devices cgroup from mountinfo and /proc/PID/cgroup ------------ */

#define TMPFS "25 1 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
#define V1DEV(at, root) "30 25 0:26 " root " " at " rw,nosuid shared:9 - cgroup cgroup rw,devices\n"
#define UNIFIED "26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
#define V2TOP "26 1 0:23 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n"
#define PROC "22 1 0:5 / /proc rw - proc proc rw\n"

static const struct {
    const char *what, *mountinfo, *cgroups;
    int version;             /* 0: refused */
    const char *want;        /* the directory, or the start of the reason */
} CGROUPS[] = {
    {"hybrid: the v1 devices hierarchy", PROC TMPFS V1DEV("/sys/fs/cgroup/devices", "/") UNIFIED,
     "7:devices:/kubepods/pod1/c1\n0::/kubepods/pod1/c1\n", 1, "/sys/fs/cgroup/devices/kubepods/pod1/c1"},
    {"cgroup2 on /sys/fs/cgroup wins over v1", PROC V2TOP V1DEV("/sys/fs/cgroup/devices", "/"),
     "7:devices:/a\n0::/b\n", 2, "/sys/fs/cgroup/b"},
    {"unified elsewhere, no v1 devices", PROC TMPFS UNIFIED, "0::/x/y\n", 2, "/sys/fs/cgroup/unified/x/y"},
    {"devices co-mounted with cpu",
     PROC TMPFS "31 25 0:27 / /sys/fs/cgroup/cpu,devices rw - cgroup cgroup rw,cpu,devices\n", "4:cpu,devices:/c\n",
     1, "/sys/fs/cgroup/cpu,devices/c"},
    {"a subtree mounted: its root taken off the path", PROC TMPFS V1DEV("/sys/fs/cgroup/devices", "/pod"),
     "7:devices:/pod/c1\n", 1, "/sys/fs/cgroup/devices/c1"},
    {"the container at the subtree's root", PROC TMPFS V1DEV("/d", "/pod"), "7:devices:/pod\n", 1, "/d/"},
    {"escaped mount point (space, tab, backslash)", PROC TMPFS V1DEV("/mnt/a\\040b\\011c\\134d", "/"),
     "7:devices:/c\n", 1, "/mnt/a b\tc\\d/c"},
    {"a ':' in the cgroup path is part of it", PROC TMPFS V1DEV("/sys/fs/cgroup/devices", "/"),
     "7:devices:/a:b\n", 1, "/sys/fs/cgroup/devices/a:b"},
    {"no device controller", PROC TMPFS, "0::/\n", 0, "no cgroup device controller is mounted"},
    {"in no v1 devices group", PROC TMPFS V1DEV("/sys/fs/cgroup/devices", "/"), "1:cpu:/a\n", 0,
     "the container is in no cgroup v1 devices group"},
    {"in no cgroup2 group", PROC V2TOP, "7:devices:/a\n", 0,
     "cgroup v2 is mounted but the container is in no cgroup v2 group"},
    {"a backslash not starting an octal escape", PROC TMPFS V1DEV("/mnt/a\\8", "/"), "7:devices:/c\n", 0,
     "mountinfo: bad escape in /mnt/a\\8"},
    {"an escaped NUL", PROC TMPFS V1DEV("/mnt/a\\000", "/"), "7:devices:/c\n", 0, "mountinfo: escape \\000"},
};

static void test_cgroup_locate(void)
{
    for (size_t i = 0; i < sizeof(CGROUPS) / sizeof(CGROUPS[0]); i++) {
        int version = 0, rv;
        const char *path = NULL;
        char why[1200];
        rv = xf_cgroup_locate(CGROUPS[i].mountinfo, strlen(CGROUPS[i].mountinfo), CGROUPS[i].cgroups,
                              strlen(CGROUPS[i].cgroups), &version, &path);
        if (CGROUPS[i].version == 0) {
            snprintf(why, sizeof(why), "got %s", rv == XF_OK ? path : xf_reason);
            report(rv == XF_ERR && strncmp(xf_reason, CGROUPS[i].want, strlen(CGROUPS[i].want)) == 0,
                   CGROUPS[i].what, why);
        } else {
            snprintf(why, sizeof(why), "got v%d %s", version, rv == XF_OK ? path : xf_reason);
            report(rv == XF_OK && version == CGROUPS[i].version && strcmp(path, CGROUPS[i].want) == 0,
                   CGROUPS[i].what, why);
        }
    }
    {   /* the kernel writes no NUL: one hides the text after it */
        static const char mi[] = PROC TMPFS "\0" V1DEV("/sys/fs/cgroup/devices", "/");
        int version;
        const char *path;
        int rv = xf_cgroup_locate(mi, sizeof(mi) - 1, "7:devices:/c\n", 13, &version, &path);
        report(rv == XF_ERR && strstr(xf_reason, "NUL") != NULL, "a NUL byte in mountinfo", xf_reason);
    }
}

/* ---- plain YAML scalars, typed as go-yaml v2 does ------------------------ */

static const struct {
    const char *text;
    const char *want;        /* the node as JSON text (typed), or NULL: refused */
    const char *as_string;   /* a CDI string field's text */
} SCALARS[] = {
    {"", "null", NULL}, {"~", "null", NULL}, {"Null", "null", NULL}, {"NULL", "null", NULL},
    {"yes", "true", "true"}, {"Y", "true", "true"}, {"On", "true", "true"}, {"TRUE", "true", "true"},
    {"no", "false", "false"}, {"n", "false", "false"}, {"OFF", "false", "false"},
    {"0x1F", "31", "31"}, {"0o17", "15", "15"}, {"017", "15", "15"}, {"0b101", "5", "5"},
    {"1_000", "1000", "1000"}, {"-0x10", "-16", "-16"}, {"+7", "7", "7"},
    {"18446744073709551615", "18446744073709551615", "18446744073709551615"},
    {"-9223372036854775808", "-9223372036854775808", "-9223372036854775808"},
    {"1.5", "1.5", "1.5"}, {".5", "0.5", "0.5"}, {"1e3", "1000", "1000"}, {"2.", "2", "2"},
    {"0.1", "0.1", "0.1"},
    {"/dev/xpu0", "\"/dev/xpu0\"", "/dev/xpu0"}, {"0.0.1", "\"0.0.1\"", "0.0.1"}, {"yess", "\"yess\"", "yess"},
    {"0x", "\"0x\"", "0x"}, {"08", "8", "8"},
    {"<<", NULL, NULL}, {".inf", NULL, NULL}, {"-.Inf", NULL, NULL}, {".NaN", NULL, NULL},
};

static const char *node_text(const fj *v)
{
    struct xf_buf b = {0};

    fj_write(v, &b);
    return b.data;
}

static void test_yaml_scalars(void)
{
    for (size_t i = 0; i < sizeof(SCALARS) / sizeof(SCALARS[0]); i++) {
        const char *s = SCALARS[i].text, *why = NULL;
        struct scalar sc;
        struct xf_arena a = {NULL, 0, 4096};
        char what[128], got[256];
        int ok = resolve_plain(s, strlen(s), &sc, &why);
        snprintf(what, sizeof(what), "YAML plain '%s'", s);
        if (SCALARS[i].want == NULL) {
            report(!ok, what, "taken, should be refused");
            continue;
        }
        if (!ok) {
            report(0, what, why);
            continue;
        }
        snprintf(got, sizeof(got), "got %s", node_text(scalar_node(&a, &sc, s, strlen(s), 0)));
        report(strcmp(got + 4, SCALARS[i].want) == 0, what, got);
        if (SCALARS[i].as_string != NULL) {
            const fj *v = scalar_node(&a, &sc, s, strlen(s), 1);
            snprintf(what, sizeof(what), "YAML plain '%s' in a string field", s);
            snprintf(got, sizeof(got), "got %s", node_text(v));
            report(v->type == FJ_STRING && strcmp(v->str, SCALARS[i].as_string) == 0, what, got);
        }
    }
}

/* Every word of go-yaml v2's resolve table, typed by the loader's lookup
 * (yaml_scalar.c keeps them by length), and look-alikes that stay strings. */
static void test_yaml_words(void)
{
    static const struct {
        const char *words;  /* space-separated */
        const char *want;   /* the node as JSON text, or NULL: refused */
    } WORDS[] = {
        {"~ null Null NULL", "null"},
        {"y Y yes Yes YES true True TRUE on On ON", "true"},
        {"n N no No NO false False FALSE off Off OFF", "false"},
        {"<< .inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF .nan .NaN .NAN", NULL},
        {"nULL yES tRUE oN fALSE ofF nO n0 .iNF +.nan name type nodev nosuid oo", "string"},
    };

    for (size_t i = 0; i < sizeof(WORDS) / sizeof(WORDS[0]); i++) {
        char list[128], *save = NULL;
        snprintf(list, sizeof(list), "%s", WORDS[i].words);
        for (char *w = strtok_r(list, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
            const char *why = NULL, *text;
            struct scalar sc;
            struct xf_arena a = {NULL, 0, 4096};
            char what[64];
            int ok = resolve_plain(w, strlen(w), &sc, &why);
            snprintf(what, sizeof(what), "YAML word '%s'", w);
            if (WORDS[i].want == NULL) {
                report(!ok, what, "taken, should be refused");
                continue;
            }
            text = ok ? node_text(scalar_node(&a, &sc, w, strlen(w), 0)) : why;
            report(ok && (strcmp(WORDS[i].want, "string") == 0 ? sc.kind == K_STR : strcmp(text, WORDS[i].want) == 0),
                   what, text);
        }
    }
}

/* U+0000 in a YAML string: only a double-quoted scalar's escape can make one
 * (libyaml's reader refuses the byte), and the node says so in every style it can reach. */
static void test_yaml_nul(void)
{
    static const struct {
        const char *doc;
        int has_nul;
    } DOCS[] = {
        {"a: \"x\\0y\"\n", 1}, {"a: \"x\\x00\"\n", 1}, {"a: \"\\u0000\"\n", 1}, {"\"k\\0\": v\n", 1},
        {"a: x\\0y\n", 0}, {"a: 'x\\0y'\n", 0}, {"a: |\n  x\\0y\n", 0}, {"a: \"x\\\\0y\"\n", 0},
    };

    for (size_t i = 0; i < sizeof(DOCS) / sizeof(DOCS[0]); i++) {
        char err[200], what[80];
        const fj *doc = fy_parse(DOCS[i].doc, strlen(DOCS[i].doc), FY_CDI_SPEC, err, sizeof(err));
        const fj *v = doc != NULL && doc->type == FJ_OBJECT && doc->n == 1 ? DOCS[i].doc[0] == '"' ? doc->keys[0]
                                                                                                    : doc->items[0]
                                                                          : NULL;
        snprintf(what, sizeof(what), "YAML NUL: %.*s", (int)strcspn(DOCS[i].doc, "\n"), DOCS[i].doc);
        report(v != NULL && v->type == FJ_STRING && v->has_nul == DOCS[i].has_nul &&
                   (fj_str(v) == NULL) == DOCS[i].has_nul,
               what, doc == NULL ? err : "has_nul wrong");
    }
}

/* ---- cdi.k8s.io/ annotations: the shared vectors ------------------------ */

static void test_annotation_vectors(const char *path)
{
    char *text;
    size_t len, prefix = strlen("kunlunxin.com/xpu=");
    const fj *doc, *list;
    char err[256];

    if (xf_read_file(path, 1u << 20, &text, &len, NULL) != XF_OK ||
        (doc = fj_parse(text, len, err, sizeof(err))) == NULL || (list = fj_get(doc, "cases")) == NULL ||
        list->type != FJ_ARRAY) {
        report(0, "annotation vectors", path);
        return;
    }
    for (size_t i = 0; i < list->n; i++) {
        const fj *c = list->items[i], *want = fj_get(c, "want");
        struct xf_nameset got = {0};
        struct xf_buf shown = {0};
        int rv = xf_annotation_names(NULL, fj_get(c, "annotations"), &got), ok;
        char what[64];
        snprintf(what, sizeof(what), "annotation vector %zu", i);
        if (want == NULL) {
            report(rv == XF_ERR, what, "taken, should be refused");
            continue;
        }
        ok = rv == XF_OK && got.list.n == want->n;
        for (size_t k = 0; k < got.list.n; k++) {
            const char *name = got.list.v[k];
            xf_buf_addf(&shown, "%s%s", k ? "," : "", name);
            ok = ok && strncmp(name, "kunlunxin.com/xpu=", prefix) == 0 &&
                 fj_str_eq(want->items[k], name + prefix, strlen(name + prefix));
        }
        report(ok, what, rv == XF_OK ? (shown.data ? shown.data : "nothing") : xf_reason);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: lib_units ANNOTATION_VECTORS\n");
        return 2;
    }
    test_reason_named();
    test_cgroup_locate();
    test_yaml_scalars();
    test_yaml_words();
    test_yaml_nul();
    test_annotation_vectors(argv[1]);
    printf("1..%d\n", cases);
    return failed ? 1 : 0;
}
