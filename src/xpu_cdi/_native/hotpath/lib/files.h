/* Reading the directories and files of spec dirs (files.c). */
#ifndef XF_FILES_H
#define XF_FILES_H
#include <stddef.h>
#include <sys/stat.h>

/* os.listdir, sorted (byte order).  0, or -errno when the dir cannot be listed. */
int rq_list_dir(const char *d, char ***names, size_t *n);

/* How reading a file went, in the terms the Python callers care about. */
enum { RD_OK, RD_OSERROR, RD_REFUSED };

/* Up to limit bytes of a regular file (NUL-terminated).  RD_OSERROR when
 * it cannot be opened or read (a directory too), RD_REFUSED for a file
 * larger than limit or of another type (a FIFO would block); either way
 * xf_reason says why, without the path. */
int rq_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st);

#endif
