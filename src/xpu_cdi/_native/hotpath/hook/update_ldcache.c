/* update-ldcache in the container (update_ldcache.h). */
#include "hook/update_ldcache.h"
#include "kernel/bpf_dev.h"
#include "kernel/inroot.h"
#include "kernel/ns.h"
#include "kernel/spawn.h"
#include "lib/strings.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LDCONF "/etc/ld.so.conf.d/00-xpu-cdi.conf"
#define LDCONF_HEADER "# written by xpu-cdi-hook update-ldcache\n"
#define LDCONFIG_ENV "PATH=/usr/sbin:/usr/bin:/sbin:/bin" /* the image's env is never used */
#define LDCONFIG_TIMEOUT_MS 30000                        /* a hung ldconfig must not hang the start */
#define LDCONFIG_OUT 4096                                /* the output kept for the message */

static const char *const LDCONFIG[] = {"/sbin/ldconfig", "/usr/sbin/ldconfig", "/bin/ldconfig",
                                       "/usr/bin/ldconfig"};

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Our entry from an earlier start, opened for
 * rewriting only when it is a regular file.  The image decides what is
 * there: a device node (the host's disk, a watchdog -- even open(2) of
 * those acts on the host, and the hook is root in the host's device
 * cgroup), a fifo (open blocks), a symlink.  So: an O_PATH fd (opens
 * nothing), fstat it, and reopen that very inode through /proc/self/fd (a
 * rename after the check cannot redirect the open).  fd, -ELOOP (a
 * symlink), -NOT_REGULAR, or -errno. */
#define NOT_REGULAR 1000 /* not an errno: a code of its own */
static int open_existing_conf(int parent, const char *name)
{
    struct stat st;
    char p[32];
    int path_fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd, err;

    if (path_fd < 0)
        return -errno;
    if (fstat(path_fd, &st) != 0) {
        err = errno;
        close(path_fd);
        return -err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(path_fd);
        return S_ISLNK(st.st_mode) ? -ELOOP : -NOT_REGULAR;
    }
    fd = open(xf_fd_path(p, path_fd), O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    err = errno;
    close(path_fd);
    return fd < 0 ? -err : fd;
}

/* Our ld.so.conf.d entry, written never through a symlink. */
static int write_conf(struct xf_root *x, const char *const *dirs, size_t ndirs)
{
    struct xf_buf text = {0};
    const char *name;
    int parent, fd, rv, created = 1;

    if ((rv = xf_parent_of(x, LDCONF, &parent, &name)) != XF_OK)
        return rv;
    fd = xf_create_as_owner(x, XF_MK_FILE, parent, name, 0644, 0, NULL);
    if (fd == -EEXIST) { /* ours from an earlier start of this container */
        created = 0;
        fd = open_existing_conf(parent, name);
    }
    if (fd < 0) {
        if (fd == -ELOOP)
            return xf_say(XF_ERR, "%s in the image is a symlink", LDCONF);
        if (fd == -NOT_REGULAR)
            return xf_say(XF_ERR, "%s in the image is not a regular file", LDCONF);
        return xf_say(XF_ERR, "cannot write %s in the container: %s", LDCONF, strerror(-fd));
    }
    rv = created ? xf_journal_unlink(x, parent, name, 0, "remove '" LDCONF "'") : 0;
    if (rv == 0 && x->fsids_lost)
        rv = -EPERM;
    xf_buf_adds(&text, LDCONF_HEADER);
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&text, "%s%s", i ? "\n" : "", dirs[i]);
    xf_buf_adds(&text, "\n");
    if (rv == 0)
        rv = write_all(fd, text.data, text.len);
    close(fd);
    if (rv != 0)
        return xf_say(XF_ERR, "cannot write %s in the container: %s", LDCONF, strerror(-rv));
    return XF_OK;
}

/* What sits at container path *path* (resolved inside the rootfs): *found* 1
 * and *st* filled, or *found* 0 when nothing resolves there; XF_ERR (said) when
 * it resolves but cannot be stat'ed. */
static int stat_in_root(const struct xf_root *x, const char *path, struct stat *st, int *found)
{
    int fd, rv;

    *found = 0;
    if (xc_resolve_in_root(x->rootfd, path, 0, &fd) != 0)
        return XF_OK;
    rv = fstat(fd, st);
    close(fd);
    if (rv != 0)
        return xf_say(XF_ERR, "fstat %s: %s", path, strerror(errno));
    *found = 1;
    return XF_OK;
}

/* The image's ldconfig run confined on the folders that exist. */
int xf_ldcache_update(struct xf_root *x, const char *const *folders, size_t nfolders, const struct xf_nsdirs *ns,
                      int pid, const char **note)
{
    int nsfds[8], nstypes[8];
    size_t nns = 0;
    const char *ldconfig = NULL, **dirs = xf_alloc(nfolders * sizeof(*dirs));
    struct xf_buf argv = {0}, msg = {0};
    char root[32], out[LDCONFIG_OUT];
    size_t ndirs = 0;
    int rv, status, code, found;
    struct stat st;

    for (size_t i = 0; i < sizeof(LDCONFIG) / sizeof(LDCONFIG[0]) && ldconfig == NULL; i++) {
        if (stat_in_root(x, LDCONFIG[i], &st, &found) != XF_OK)
            return XF_ERR;
        if (found && S_ISREG(st.st_mode) && (st.st_mode & 0111))
            ldconfig = LDCONFIG[i];
    }
    if (ldconfig == NULL) {
        *note = "no ldconfig in the image: ld cache left alone";
        return XF_OK;
    }
    for (size_t i = 0; i < nfolders; i++) { /* folders are de-duplicated already */
        if (stat_in_root(x, folders[i], &st, &found) != XF_OK)
            return XF_ERR;
        if (found && S_ISDIR(st.st_mode))
            dirs[ndirs++] = folders[i];
    }
    if (ndirs == 0) {
        *note = "none of the library folders exist in the container: ld cache left alone";
        return XF_OK;
    }
    if ((rv = write_conf(x, dirs, ndirs)) != XF_OK)
        return rv;
    xf_buf_add(&argv, ldconfig, strlen(ldconfig) + 1);
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_add(&argv, dirs[i], strlen(dirs[i]) + 1);
    if (xf_open_namespaces(ns, pid, nsfds, nstypes, &nns) != XF_OK) /* only now: each look-up costs */
        return XF_ERR;
    rv = xc_spawn_confined(xf_fd_path(root, x->rootfd), argv.data, 1 + ndirs, LDCONFIG_ENV, 1, nsfds, nstypes, nns,
                           LDCONFIG_TIMEOUT_MS, out, sizeof(out), &status);
    for (size_t i = 0; i < nns; i++)
        close(nsfds[i]);
    if (rv != 0)
        return xf_say(XF_ERR, "cannot run the image's %s: %s", ldconfig, strerror(-rv));
    code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
    if (code != 0) {
        /* the last non-empty line of its output (ldconfig's error comes last),
         * quoted as every message quotes a value: the image wrote it */
        size_t end = strlen(out), start;
        while (end > 0 && strchr(" \t\r\n\v\f", out[end - 1]))
            end--;
        start = end;
        while (start > 0 && out[start - 1] != '\n' && out[start - 1] != '\r')
            start--;
        if (end == start)
            return xf_say(XF_ERR, "the image's %s exited with %d: no output", ldconfig, code);
        return xf_say(XF_ERR, "the image's %s exited with %d: %s", ldconfig, code,
                      xf_quoted_short(out + start, end - start));
    }
    xf_buf_adds(&msg, "ld cache updated for ");
    for (size_t i = 0; i < ndirs; i++)
        xf_buf_addf(&msg, "%s%s", i ? ", " : "", dirs[i]);
    *note = msg.data;
    return XF_OK;
}
