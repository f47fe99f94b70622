/* See util.h. */
#include "runtime/edit/util.h"

/* obj's member key, NULL when absent or null: a JSON null member says
 * nothing, as in the CDI and OCI specs' Go types (a nil pointer or slice). */
fj *getv(const fj *obj, const char *key)
{
    fj *v = fj_get(obj, key);

    return v != NULL && v->type == FJ_NULL ? NULL : v;
}

int int_or_absent(const fj *v)
{
    return v == NULL || (v->type == FJ_NUMBER && v->is_int);
}

/* Keep the items of array a for which drop(item, arg) is 0, in order,
 * in place. */
void keep_unless(fj *a, int (*drop)(const fj *item, const void *arg), const void *arg)
{
    size_t m = 0;

    for (size_t i = 0; i < a->n; i++)
        if (!drop(a->items[i], arg))
            a->items[m++] = a->items[i];
    a->n = m;
}

int contains(const fj *a, const fj *v)
{
    for (size_t i = 0; i < a->n; i++)
        if (fj_equal(a->items[i], v))
            return 1;
    return 0;
}
