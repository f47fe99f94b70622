/* xpu-cdi-fast-test request (placeholder: being written). */
#include "common.h"

#include <stdio.h>

int xf_test_request(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "not written yet\n");
    return 2;
}
