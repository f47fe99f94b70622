/* YAML documents into the JSON tree: see yaml.h.  libyaml parses; this
 * file builds the tree from its events and types the scalars. */
#include "lib/yaml.h"
#include "lib/tree_build.h"
#include "lib/yaml_scalar.h"

#ifndef XPU_CDI_LINKED_YAML
#include <dlfcn.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* libyaml is loaded on first use, not linked: a container start that
 * reads no YAML (JSON specs, no node config: most of them) does not pay
 * for mapping and relocating it (0.05-0.1 ms of the hook's 0.3 when
 * nothing is asked).  Still the distribution's shared library, so its
 * security updates apply; the packages depend on it by name. */
#define LIBYAML "libyaml-0.so.2"

static struct {
    int (*initialize)(yaml_parser_t *);
    void (*set_input_string)(yaml_parser_t *, const unsigned char *, size_t);
    int (*parse)(yaml_parser_t *, yaml_event_t *);
    void (*event_delete)(yaml_event_t *);
    void (*parser_delete)(yaml_parser_t *);
} yl;

#ifdef XPU_CDI_LINKED_YAML
/* The static build (build_bin.py --static): libyaml is linked in. */
int fy_load_library(char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    yl.initialize = yaml_parser_initialize;
    yl.set_input_string = yaml_parser_set_input_string;
    yl.parse = yaml_parser_parse;
    yl.event_delete = yaml_event_delete;
    yl.parser_delete = yaml_parser_delete;
    return 1;
}
#else
int fy_load_library(char *err, size_t errlen)
{
    void *h;

    if (yl.parse != NULL)
        return 1;
    if ((h = dlopen(LIBYAML, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        snprintf(err, errlen, "cannot load %s (%s): install libyaml-0-2 (libyaml on RPM distributions)", LIBYAML,
                 dlerror());
        return 0;
    }
    *(void **)&yl.initialize = dlsym(h, "yaml_parser_initialize");
    *(void **)&yl.set_input_string = dlsym(h, "yaml_parser_set_input_string");
    *(void **)&yl.event_delete = dlsym(h, "yaml_event_delete");
    *(void **)&yl.parser_delete = dlsym(h, "yaml_parser_delete");
    *(void **)&yl.parse = dlsym(h, "yaml_parser_parse");
    if (yl.initialize == NULL || yl.set_input_string == NULL || yl.event_delete == NULL || yl.parser_delete == NULL ||
        yl.parse == NULL) {
        yl.parse = NULL;
        snprintf(err, errlen, "%s lacks the functions of libyaml 0.2: reinstall libyaml-0-2", LIBYAML);
        return 0;
    }
    return 1;
}
#endif


struct anchor {
    const char *name;
    fj *node;
    unsigned long long size; /* nodes of its tree as aliases expand it */
    int height;              /* levels of containers in it (0: a scalar) */
};

struct yframe {
    fj *node;            /* its members are on the loader's stack until it ends */
    size_t base;         /* where they start there (keys and values alternating in a mapping) */
    unsigned long long size;
    int height;          /* 1 + the highest member's height */
    const char *anchor;  /* registered when the node is complete: an alias inside it finds nothing */
    int key_pending;     /* mapping: a key is on the stack, waiting for its value */
    const char *context; /* CDI spec: the key this container is the value of */
    yaml_mark_t start;
};

struct loader {
    yaml_parser_t parser;
    int flags;
    struct xf_arena arena;  /* every node, member array and text of the tree */
    fj **stack;             /* members of the open containers */
    size_t nstack, capstack;
    int depth;
    struct anchor *anchors;
    size_t nanchors, capanchors;
    fj *root;
    int documents;
    char *err;
    size_t errlen;
    struct yframe frames[FJ_MAX_DEPTH];  /* last: fy_parse leaves them unset until used */
};

static fj *fail_at(struct loader *l, yaml_mark_t mark, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static fj *fail_at(struct loader *l, yaml_mark_t mark, const char *fmt, ...)
{
    char what[300];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(l->err, l->errlen, "%s at line %zu, column %zu", what, mark.line + 1, mark.column + 1);
    return NULL;
}

/* libyaml's own error: its problem, where, and the construct it was in. */
static void parser_error(struct loader *l)
{
    const yaml_parser_t *p = &l->parser;
    const char *problem = p->problem ? p->problem : "invalid YAML";

    if (p->error == YAML_READER_ERROR)
        snprintf(l->err, l->errlen, "%s at byte %zu", problem, p->problem_offset);
    else if (p->context != NULL)
        snprintf(l->err, l->errlen, "%s at line %zu, column %zu (%s at line %zu)", problem, p->problem_mark.line + 1,
                 p->problem_mark.column + 1, p->context, p->context_mark.line + 1);
    else
        snprintf(l->err, l->errlen, "%s at line %zu, column %zu", problem, p->problem_mark.line + 1,
                 p->problem_mark.column + 1);
}

/* ---- scalars, typed as go-yaml v2 resolves them ------------------------ */

/* ---- building ----------------------------------------------------------- */

static void push(struct loader *l, fj *v)
{
    if (l->nstack == l->capstack) {
        l->capstack = l->capstack ? 2 * l->capstack : 64;
        l->stack = xf_realloc(l->stack, l->capstack * sizeof(*l->stack));
    }
    l->stack[l->nstack++] = v;
}

static fj *duplicate(struct loader *l, const fj *key, const yaml_mark_t *at)
{
    char msg[200];

    fj_dup_message(key, msg, sizeof(msg));
    return fail_at(l, *at, "%s", msg);
}

/* The expanded size of a subtree, saturating. */
static int grow_size(struct loader *l, unsigned long long *total, unsigned long long add, const yaml_mark_t *at)
{
    *total = *total + add < *total ? ULLONG_MAX : *total + add;
    if (*total > FY_MAX_NODES) {
        fail_at(l, *at, "aliases expand the document to more than %d nodes", FY_MAX_NODES);
        return 0;
    }
    return 1;
}

static int remember(struct loader *l, const char *name, fj *node, unsigned long long size, int height)
{
    if (name == NULL)
        return 1;
    if (l->nanchors == l->capanchors) {
        l->capanchors = l->capanchors ? 2 * l->capanchors : 16;
        l->anchors = xf_realloc(l->anchors, l->capanchors * sizeof(*l->anchors));
    }
    l->anchors[l->nanchors].name = name;
    l->anchors[l->nanchors].node = node;
    l->anchors[l->nanchors].height = height;
    l->anchors[l->nanchors++].size = size;
    return 1;
}

/* The key the value now coming is for: the pending key of a mapping, or
 * the key a sequence is the value of (additionalGids: its items). */
static const char *value_context(const struct loader *l)
{
    const struct yframe *f = l->depth > 0 ? &l->frames[l->depth - 1] : NULL;

    if (f == NULL)
        return NULL;
    if (f->node->type == FJ_OBJECT)
        return f->key_pending ? l->stack[l->nstack - 1]->str : NULL;
    return f->context;  /* a sequence: its items are what its key names (additionalGids) */
}

/* Hand a finished value (of expanded size and height) to the container
 * around it, or make it the root.  An alias may put a deep anchor deep
 * down: the depth limit holds for the tree as aliases expand it too, as
 * every walk over it recurses. */
static int place(struct loader *l, fj *v, unsigned long long size, int height, const yaml_mark_t *at)
{
    struct yframe *f;

    if (l->depth + height > FJ_MAX_DEPTH) {
        fail_at(l, *at, "aliases nest the document deeper than %d levels", FJ_MAX_DEPTH);
        return 0;
    }
    if (l->depth == 0) {
        l->root = v;
        return 1;
    }
    f = &l->frames[l->depth - 1];
    if (!grow_size(l, &f->size, size, at))
        return 0;
    if (height + 1 > f->height)
        f->height = height + 1;
    if (f->node->type == FJ_OBJECT && !f->key_pending) {  /* v is a key */
        if (v->type != FJ_STRING) {
            fail_at(l, *at, "a mapping or sequence (or an alias) as a mapping key");
            return 0;
        }
        if ((l->nstack - f->base) / 2 < XF_LINEAR_KEYS && xf_key_among(l->stack, f->base, l->nstack, v)) {
            duplicate(l, v, at);
            return 0;
        }
        f->key_pending = 1;
    } else {
        f->key_pending = 0;
    }
    push(l, v);
    return 1;
}

static const char *copy_name(struct loader *l, const yaml_char_t *s)
{
    return s != NULL ? xf_arena_text(&l->arena, (const char *)s, strlen((const char *)s)) : NULL;
}

#define TAG(x) "tag:yaml.org,2002:" x

/* A container's tag: none, or the core one of its kind. */
static int container_tag_ok(struct loader *l, const yaml_char_t *tag, const char *want, yaml_mark_t at)
{
    if (tag == NULL || strcmp((const char *)tag, want) == 0 || strcmp((const char *)tag, "!") == 0)
        return 1;
    fail_at(l, at, "YAML tag %.60s, which a CDI spec or config file has no use for", (const char *)tag);
    return 0;
}

static int on_scalar(struct loader *l, yaml_event_t *e)
{
    const char *s = (const char *)e->data.scalar.value, *tag = (const char *)e->data.scalar.tag, *why = NULL;
    size_t len = e->data.scalar.length;
    struct yframe *f = l->depth > 0 ? &l->frames[l->depth - 1] : NULL;
    int is_key = f != NULL && f->node->type == FJ_OBJECT && !f->key_pending;
    struct scalar sc = {K_STR, 0, 0, 0, 0};
    fj *v;

    if (tag != NULL && strcmp(tag, "!") != 0 && strcmp(tag, TAG("str")) != 0) {
        static const char *const typed[] = {TAG("null"), TAG("bool"), TAG("int"), TAG("float"), NULL};
        static const enum kind kinds[] = {K_NULL, K_BOOL, K_INT, K_FLOAT};
        size_t k;
        for (k = 0; typed[k] != NULL && strcmp(tag, typed[k]) != 0; k++)
            ;
        if (typed[k] == NULL) {
            fail_at(l, e->start_mark, "YAML tag %.60s, which a CDI spec or config file has no use for", tag);
            return 0;
        }
        if (!resolve_plain(s, len, &sc, &why) || !(sc.kind == kinds[k] || (kinds[k] == K_INT && sc.kind == K_UINT) ||
                                                   (kinds[k] == K_FLOAT && (sc.kind == K_INT || sc.kind == K_UINT)))) {
            fail_at(l, e->start_mark, "a value that is not what its tag %.60s says", tag);
            return 0;
        }
    } else if (tag == NULL && e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && fy_may_be_typed(s, len) &&
               !resolve_plain(s, len, &sc, &why)) {
        fail_at(l, e->start_mark, "%s", why);
        return 0;
    }
    if (sc.kind == K_STR) {
        /* a string, key or value: its text copied beside the tree's other text, and libyaml's
         * buffer freed with the event for the next scalar's (keeping the buffer saved the copy
         * but spread the strings over pages of their own: 3 page faults more for 8 cards) */
        v = text_kept(&l->arena, FJ_STRING, xf_arena_text(&l->arena, s, len), len,
                      e->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    } else if (is_key) {
        if ((v = key_node(&l->arena, &sc, s, len, &why)) == NULL) {
            fail_at(l, e->start_mark, "%s", why);
            return 0;
        }
    } else {
        v = scalar_node(&l->arena, &sc, s, len, (l->flags & FY_CDI_SPEC) && !typed_field(value_context(l)));
    }
    return place(l, v, 1, 0, &e->start_mark) && remember(l, copy_name(l, e->data.scalar.anchor), v, 1, 0);
}

static int on_start(struct loader *l, const yaml_event_t *e, enum fj_type type)
{
    const yaml_char_t *tag = type == FJ_OBJECT ? e->data.mapping_start.tag : e->data.sequence_start.tag;
    const yaml_char_t *anchor = type == FJ_OBJECT ? e->data.mapping_start.anchor : e->data.sequence_start.anchor;
    struct yframe *f;

    if (!container_tag_ok(l, tag, type == FJ_OBJECT ? TAG("map") : TAG("seq"), e->start_mark))
        return 0;
    if (l->depth > 0 && l->frames[l->depth - 1].node->type == FJ_OBJECT && !l->frames[l->depth - 1].key_pending) {
        fail_at(l, e->start_mark, "a mapping or sequence (or an alias) as a mapping key");
        return 0;
    }
    if (l->depth >= FJ_MAX_DEPTH) {
        fail_at(l, e->start_mark, "nested deeper than %d levels", FJ_MAX_DEPTH);
        return 0;
    }
    f = &l->frames[l->depth];
    memset(f, 0, sizeof(*f));
    f->context = value_context(l);
    f->node = xf_arena_get(&l->arena, sizeof(*f->node));
    f->node->type = type;
    f->base = l->nstack;
    f->size = 1;
    f->height = 1;
    f->anchor = copy_name(l, anchor);
    f->start = e->start_mark;
    l->depth++;
    return 1;
}

static int on_end(struct loader *l, const yaml_event_t *e)
{
    struct yframe f = l->frames[--l->depth];
    const fj *twice;

    xf_take_members(&l->arena, f.node, l->stack, f.base, l->nstack);
    l->nstack = f.base;
    if (f.node->n > XF_LINEAR_KEYS && (twice = xf_repeated_key(f.node)) != NULL) {
        duplicate(l, twice, &f.start);
        return 0;
    }
    return place(l, f.node, f.size, f.height, &e->start_mark) && remember(l, f.anchor, f.node, f.size, f.height);
}

static int on_alias(struct loader *l, const yaml_event_t *e)
{
    const char *name = (const char *)e->data.alias.anchor;

    for (size_t i = l->nanchors; i-- > 0;)  /* a later anchor of the same name hides an earlier one */
        if (strcmp(l->anchors[i].name, name) == 0)
            return place(l, l->anchors[i].node, l->anchors[i].size, l->anchors[i].height, &e->start_mark);
    fail_at(l, e->start_mark, "alias *%.60s names no complete anchor (undefined, or used inside itself)", name);
    return 0;
}

static int on_event(struct loader *l, yaml_event_t *e)
{
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++l->documents > 1) {
            fail_at(l, e->start_mark, "a second YAML document (a spec or config file is one document)");
            return 0;
        }
        return 1;
    case YAML_SCALAR_EVENT:
        return on_scalar(l, e);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(l, e, FJ_ARRAY);
    case YAML_MAPPING_START_EVENT:
        return on_start(l, e, FJ_OBJECT);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(l, e);
    case YAML_ALIAS_EVENT:
        return on_alias(l, e);
    default:  /* stream start/end, document end */
        return 1;
    }
}

fj *fy_parse(const char *text, size_t len, int flags, char *err, size_t errlen)
{
    /* its frames are set as containers open: zeroing them all would touch pages no spec uses */
    struct loader *l = memset(xf_malloc(sizeof(*l)), 0, offsetof(struct loader, frames));
    char dummy[1];
    fj *root = NULL;
    int ok = 1, done = 0;

    if (err == NULL || errlen == 0) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    l->err = err;
    l->errlen = errlen;
    l->flags = flags;
    l->arena.next = len < ((size_t)10 << 20) ? 4 * len + 4096 : (size_t)64 << 20;  /* as json_parse.c sizes it */
    if (len > FJ_MAX_BYTES) {
        snprintf(err, errlen, "%zu bytes, more than the %zu a document may have", len, (size_t)FJ_MAX_BYTES);
        free(l);
        return NULL;
    }
    if (!fy_load_library(err, errlen)) {
        free(l);
        return NULL;
    }
    if (!yl.initialize(&l->parser))
        abort();
    yl.set_input_string(&l->parser, (const unsigned char *)text, len);
    while (ok && !done) {
        yaml_event_t e;
        if (!yl.parse(&l->parser, &e)) {
            parser_error(l);
            ok = 0;
            break;
        }
        done = e.type == YAML_STREAM_END_EVENT;
        ok = on_event(l, &e);
        yl.event_delete(&e);
    }
    if (ok)
        root = l->root != NULL ? l->root : fj_new(FJ_NULL);  /* an empty stream is null, as go-yaml has it */
    yl.parser_delete(&l->parser);
    free(l->anchors);
    free(l->stack);
    free(l);
    return root;
}
