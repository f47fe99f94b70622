/* xpu-cdi-hook, compiled front end (being written: defers everything). */
#include "common.h"

int main(int argc, char **argv)
{
    (void)argc;
    xf_exec_python("xpu-cdi-hook", argv, NULL, 0);
}
