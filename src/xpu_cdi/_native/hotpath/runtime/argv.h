/* The wrapper's command line (argv.c): runc's and crun's argument syntax. */
#ifndef XF_ARGV_H
#define XF_ARGV_H
#include "lib/common.h"

/* The index of the runtime subcommand in args
 * (global options skipped) and its name in *command, or -1 and NULL. */
int xf_split_command(int nargs, char *const *args, const char **command);

/* The value of the first of names (nnames of them)
 * at or after args[start] ("-b X", "--bundle=X"), or NULL; "--" ends it. */
const char *xf_option_value(int nargs, char *const *args, int start, const char *const *names, size_t nnames);

/* Whether one of names (nnames of them) is among the global options (those before the
 * subcommand): `--version` is the wrapper's own only there. */
int xf_global_flag(int nargs, char *const *args, const char *const *names, size_t nnames);

#endif
