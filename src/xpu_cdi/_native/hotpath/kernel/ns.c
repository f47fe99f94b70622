/* Namespaces, filesystem ids and mount(2) for the hook (ns.h). */
#define _GNU_SOURCE /* setns, O_PATH and the other Linux interfaces below */
#include "kernel/ns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/wait.h>

/* Set the filesystem uid/gid (creations in a user namespace's filesystems
 * must be owned by ids mapped there, else EOVERFLOW).  setfsuid reports no
 * error, so read the value back: -EPERM when it did not take. */
int xc_setfsids(unsigned int uid, unsigned int gid)
{
    setfsgid(gid);
    setfsuid(uid);
    if ((unsigned int)setfsgid(-1) != gid || (unsigned int)setfsuid(-1) != uid)
        return -EPERM;
    return 0;
}

int xc_mount(const char *source, const char *target, const char *fstype,
             unsigned long flags, const char *data)
{
    return mount(source, target, fstype, flags, data) == 0 ? 0 : -errno;
}

int xc_umount(const char *target, int flags)
{
    return umount2(target, flags) == 0 ? 0 : -errno;
}
