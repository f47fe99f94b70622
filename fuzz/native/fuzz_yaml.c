/* libFuzzer entry point for the binaries' YAML loader
 * (src/xpu_cdi/_native/hotpath/lib/yaml_*.c over libyaml): CDI specs from other
 * tools and the node config file.  The first byte picks the typing (plain,
 * or a CDI spec's); every accepted tree must be writable as JSON that
 * fj_parse reads back as an equal tree (so the limits the JSON side
 * promises hold for YAML trees too, aliases included). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/yaml.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[512];
    struct xf_buf out = {0};
    int flags;
    fj *v, *back;

    if (size == 0)
        return 0;
    flags = data[0] & 1 ? FY_CDI_SPEC : 0;
    v = fy_parse((const char *)data + 1, size - 1, flags, err, sizeof(err));
    if (v == NULL) {
        if (err[0] == '\0' || strchr(err, '\n') != NULL)
            abort();
        return 0;
    }
    if (fj_dump(v, &out, err, sizeof(err)) != 0)
        abort();
    back = fj_parse(out.data, out.len, err, sizeof(err));
    if (back == NULL || !fj_equal(v, back)) {
        fprintf(stderr, "JSON of a YAML tree: %s\n", back == NULL ? err : "not equal");
        abort();
    }
    free(out.data);
    return 0;
}
