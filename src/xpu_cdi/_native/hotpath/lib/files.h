/* Reading the directories and files of spec dirs (files.c). */
#ifndef XF_FILES_H
#define XF_FILES_H
#include <stddef.h>
#include <sys/stat.h>

/* The names in dir d but "." and "..", sorted by their bytes.  0, or
 * -errno when the dir cannot be listed. */
int xf_list_dir(const char *d, char ***names, size_t *n);

/* How reading a file went: read, absent, unreadable (the system said no),
 * or refused by us (too large, not a regular file). */
enum { RD_OK, RD_ABSENT, RD_UNREADABLE, RD_REFUSED };

/* Up to limit bytes of a regular file (NUL-terminated).  RD_ABSENT when
 * there is no such file (xf_reason untouched: the usual case of an
 * optional file, answered without formatting), RD_UNREADABLE when it
 * cannot be opened or read (a directory too), RD_REFUSED for a file
 * larger than limit or of another type (a FIFO would block); xf_reason
 * then says why, without the path. */
int xf_read_regular(const char *path, size_t limit, char **data, size_t *len, struct stat *st);

#endif
