/* libFuzzer entry point for the binaries' JSON parser and writer
 * (src/xpu_cdi/_native/hotpath/lib/json_*.c over yajl): what a pod controls
 * (config.json, the OCI state) reaches fj_parse.
 *
 * Beyond "no crash, no sanitizer report", it checks the round trip the
 * wrapper relies on when it rewrites config.json: whatever fj_parse
 * accepts, fj_dump writes, fj_parse reads back as an equal tree, and
 * writing that again gives the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[512];
    struct xf_buf once = {0}, twice = {0};
    fj *v = fj_parse((const char *)data, size, err, sizeof(err)), *back;

    if (v == NULL) {
        if (err[0] == '\0' || strchr(err, '\n') != NULL)
            abort(); /* every refusal is one line */
        return 0;
    }
    if (fj_dump(v, &once, err, sizeof(err)) != 0)
        abort(); /* a parsed tree is never too deep to write */
    back = fj_parse(once.data, once.len, err, sizeof(err));
    if (back == NULL || !fj_equal(v, back)) {
        fprintf(stderr, "round trip failed: %s\n", back == NULL ? err : "not equal");
        abort();
    }
    if (fj_dump(back, &twice, err, sizeof(err)) != 0 || twice.len != once.len ||
        memcmp(twice.data, once.data, once.len) != 0)
        abort();
    free(once.data);
    free(twice.data);
    return 0;
}
