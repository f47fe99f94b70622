/* xpu-container-runtime, compiled front end (being written: defers everything). */
#include "common.h"

int main(int argc, char **argv)
{
    (void)argc;
    xf_exec_python("xpu-container-runtime", argv, NULL, 0);
}
