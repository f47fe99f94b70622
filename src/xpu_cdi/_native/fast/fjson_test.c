/* xpu-cdi-fast-test json MODE: the JSON tree, driven by tests/native/test_fjson.py.
 *
 * stdin is a sequence of frames "<decimal byte count>\n<bytes>"; one line
 * of output per frame (or pair of frames):
 *
 *   parse   doc          -> "OK <fj_write of the tree>" | "ERR <message>"
 *   equal   doc, doc     -> "1" | "0" (fj_equal) | "ERR <message>"
 *   escape  bytes        -> fj_write(fj_new_str(bytes)) (bytes without NUL)
 *   get     doc, key     -> "OK <fj_write of fj_get(doc, key)>" | "NONE", "STR" for "OK"
 *                           when fj_str() accepts the member
 *   edit    doc, script  -> "OK <fj_write of the edited doc>" | "ERR <message>"
 *   yaml    doc          -> "OK <fj_write of fy_parse(doc)>" | "ERR <message>"
 *   cdiyaml doc          -> the same with FY_CDI_SPEC (scalars typed as a CDI spec's fields)
 *   yamlfile path        -> xf_yaml_load_file(path, 4096): "OK <tree>" | "ENOENT <message>" | "ERR <message>"
 *
 * An edit script is a JSON array of operations, each an array:
 *   ["set", PATH, KEY, VALUE]       fj_set(at(PATH), KEY, parse(VALUE))
 *   ["set_str", PATH, KEY, STRING]  fj_set(at(PATH), KEY, fj_new_str(STRING))
 *   ["set_int", PATH, KEY, INT]     fj_set(at(PATH), KEY, fj_new_int(INT))
 *   ["append", PATH, VALUE]         fj_append(at(PATH), parse(VALUE))
 *   ["append_str", PATH, STRING]    fj_append(at(PATH), fj_new_str(STRING))
 *   ["insert", PATH, INDEX, VALUE]  fj_insert(at(PATH), INDEX, parse(VALUE))
 *   ["remove", PATH, INDEX]         fj_remove(at(PATH), INDEX)
 *   ["object_at", PATH, KEY]        fj_object_at(at(PATH), KEY)
 *   ["array_at", PATH, KEY]         fj_array_at(at(PATH), KEY)
 *   ["new", PATH, KEY, TYPE]        fj_set(at(PATH), KEY, fj_new(TYPE)), TYPE "null"..."object"
 * where PATH is an array of keys and indexes from the root and VALUE is
 * JSON text (a string), parsed with fj_parse. */
#include "fjson.h"
#include "fyaml.h"
#include "test_main.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FRAME_LIMIT ((size_t)64 << 20) /* the tests send documents of a few MB */

static void emit(const char *tag, const fj *v)
{
    struct xf_buf b = {0};

    xf_buf_add(&b, "", 0);
    if (v != NULL)
        fj_write(v, &b);
    printf("%s%s%s\n", tag, v != NULL ? " " : "", b.data);
    free(b.data);
}

static fj *walk(fj *v, const fj *path)
{
    for (size_t i = 0; v != NULL && i < path->n; i++) {
        const fj *step = path->items[i];
        if (step->type == FJ_STRING)
            v = fj_get(v, fj_str(step));
        else if (step->type == FJ_NUMBER && step->is_int && v->type == FJ_ARRAY && step->num >= 0 &&
                 (size_t)step->num < v->n)
            v = v->items[step->num];
        else
            v = NULL;
    }
    return v;
}

static const char *edit(fj *doc, const fj *script)
{
    static const char *types[] = {"null", "false", "true", "number", "string", "array", "object"};
    char err[256];

    if (script->type != FJ_ARRAY)
        return "script is not an array";
    for (size_t i = 0; i < script->n; i++) {
        const fj *op = script->items[i];
        const char *name;
        fj *at, *value = NULL;
        if (op->type != FJ_ARRAY || op->n < 3 || (name = fj_str(op->items[0])) == NULL ||
            op->items[1]->type != FJ_ARRAY)
            return "bad operation";
        at = walk(doc, op->items[1]);
        if (at == NULL)
            return "path not found";
        if (strcmp(name, "set") == 0 || strcmp(name, "append") == 0 || strcmp(name, "insert") == 0) {
            const fj *text = op->items[op->n - 1];
            if (text->type != FJ_STRING || (value = fj_parse(text->str, text->len, err, sizeof(err))) == NULL)
                return "bad value";
        }
        if (strcmp(name, "set") == 0 && op->n == 4)
            fj_set(at, fj_str(op->items[2]), value);
        else if (strcmp(name, "set_str") == 0 && op->n == 4)
            fj_set(at, fj_str(op->items[2]), fj_new_str(fj_str(op->items[3])));
        else if (strcmp(name, "set_int") == 0 && op->n == 4)
            fj_set(at, fj_str(op->items[2]), fj_new_int(op->items[3]->num));
        else if (strcmp(name, "append") == 0 && op->n == 3)
            fj_append(at, value);
        else if (strcmp(name, "append_str") == 0 && op->n == 3)
            fj_append(at, fj_new_str(fj_str(op->items[2])));
        else if (strcmp(name, "insert") == 0 && op->n == 4)
            fj_insert(at, (size_t)op->items[2]->num, value);
        else if (strcmp(name, "remove") == 0 && op->n == 3)
            fj_remove(at, (size_t)op->items[2]->num);
        else if (strcmp(name, "object_at") == 0 && op->n == 3) {
            if (fj_object_at(at, fj_str(op->items[2])) == NULL)
                return "object_at gave NULL";
        } else if (strcmp(name, "array_at") == 0 && op->n == 3) {
            if (fj_array_at(at, fj_str(op->items[2])) == NULL)
                return "array_at gave NULL";
        } else if (strcmp(name, "new") == 0 && op->n == 4) {
            size_t t;
            for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
                if (fj_str(op->items[3]) != NULL && strcmp(fj_str(op->items[3]), types[t]) == 0)
                    break;
            if (t == sizeof(types) / sizeof(types[0]))
                return "bad type";
            fj_set(at, fj_str(op->items[2]), fj_new((enum fj_type)t));
        } else
            return "bad operation";
    }
    return NULL;
}

int xf_test_json(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    char *a, *b, err[512];
    size_t alen, blen;
    int r;

    if (strcmp(mode, "parse") && strcmp(mode, "equal") && strcmp(mode, "escape") && strcmp(mode, "get") &&
        strcmp(mode, "edit") && strcmp(mode, "yaml") && strcmp(mode, "cdiyaml") && strcmp(mode, "yamlfile")) {
        fprintf(stderr, "usage: xpu-cdi-fast-test json parse|equal|escape|get|edit|yaml|cdiyaml|yamlfile < frames\n");
        return 2;
    }
    while ((r = xf_test_next_frame(&a, &alen, FRAME_LIMIT)) > 0) {
        int pair = strcmp(mode, "parse") != 0 && strcmp(mode, "escape") != 0 && strcmp(mode, "yaml") != 0 &&
                   strcmp(mode, "cdiyaml") != 0 && strcmp(mode, "yamlfile") != 0;
        fj *x, *y = NULL;
        if (pair && xf_test_next_frame(&b, &blen, FRAME_LIMIT) <= 0)
            r = -1;
        if (r < 0)
            break;
        if (strcmp(mode, "escape") == 0) {
            emit("OK", fj_new_str(a));
            continue;
        }
        if (strcmp(mode, "yamlfile") == 0) {
            int rv = xf_yaml_load_file(a, 4096, &x, err, sizeof(err));
            if (rv == 0)
                emit("OK", x);
            else
                printf("%s %s\n", rv == -ENOENT ? "ENOENT" : "ERR", err);
            continue;
        }
        if (strcmp(mode, "yaml") == 0 || strcmp(mode, "cdiyaml") == 0) {
            x = fy_parse(a, alen, strcmp(mode, "cdiyaml") == 0 ? FY_CDI_SPEC : 0, err, sizeof(err));
            if (x == NULL)
                printf("ERR %s\n", err);
            else
                emit("OK", x);
            continue;
        }
        x = fj_parse(a, alen, err, sizeof(err));
        if (x == NULL) {
            printf("ERR %s\n", err);
            continue;
        }
        if (strcmp(mode, "parse") == 0) {
            emit("OK", x);
        } else if (strcmp(mode, "get") == 0) {
            fj *v = fj_get(x, b);
            if (v == NULL)
                printf("NONE\n");
            else
                emit(fj_str(v) != NULL ? "STR" : "OK", v);
        } else if ((y = fj_parse(b, blen, err, sizeof(err))) == NULL) {
            printf("ERR %s\n", err);
        } else if (strcmp(mode, "equal") == 0) {
            printf("%d\n", fj_equal(x, y));
        } else {
            const char *why = edit(x, y);
            if (why != NULL)
                printf("ERR %s\n", why);
            else
                emit("OK", x);
        }
    }
    if (r < 0) {
        fprintf(stderr, "xpu-cdi-fast-test json: malformed frame\n");
        return 2;
    }
    return 0;
}
