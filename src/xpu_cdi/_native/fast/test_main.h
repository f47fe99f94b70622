/* Shared by the *_test.c modules of xpu-cdi-fast-test (test_main.c). */
#ifndef XF_TEST_MAIN_H
#define XF_TEST_MAIN_H
#include <stddef.h>

/* The next frame of stdin, "<decimal length>\n<bytes>", NUL-terminated in
 * *data: 1, 0 at the end of input, -1 on a malformed frame or one longer
 * than limit. */
int xf_test_next_frame(char **data, size_t *len, size_t limit);

#endif
