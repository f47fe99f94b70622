/* Which stage the hook runs at: see stage.h. */
#include "lib/common.h"
#include "hook/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_STATUS_BYTES 65536

/* 1 when /proc is the procfs of our own pid namespace, 0 when it belongs
 * to an ancestor (we were forked into a container's pid namespace before
 * it mounted its own /proc), -1 when unreadable.  The NSpid line of
 * /proc/self/status lists our pid in each pid namespace from the one of
 * that procfs down to ours: one entry means they are the same.  Kernels
 * before 4.1 have no NSpid: then compare the pid /proc/self names with
 * ours (a coincidence of numbers is possible there, not with NSpid). */
static int procfs_is_ours(void)
{
    char *text, link[32];
    size_t len;
    const char *line;
    ssize_t n;

    if (xf_read_proc_one("/proc/self/status", MAX_STATUS_BYTES, &text, &len) != XF_OK)
        return -1;
    for (line = text; line != NULL && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "NSpid:", 6) == 0) {
            size_t fields = 0;
            const char *p = line + 6, *end = strchr(p, '\n');
            if (end == NULL)
                end = p + strlen(p);
            while (p < end) {
                while (p < end && (*p == ' ' || *p == '\t'))
                    p++;
                if (p < end)
                    fields++;
                while (p < end && *p != ' ' && *p != '\t')
                    p++;
            }
            return fields == 1;
        }
    }
    n = readlink("/proc/self", link, sizeof(link) - 1);
    if (n < 0) {
        xf_say(XF_ERR, "/proc/self: %s (is /proc mounted?)", strerror(errno));
        return -1;
    }
    link[n] = '\0';
    return strtol(link, NULL, 10) == (long)getpid();
}

int xf_stage_of(int pid, enum xf_stage *stage)
{
    char theirs[64];
    struct stat a, b;
    int ours;

    /* 0: crun's createContainer state; 1: the init of our own pid namespace,
     * which no runtime's container is from the runtime's side */
    if (pid <= 1) {
        *stage = XF_STAGE_INSIDE;
        return XF_OK;
    }
    if ((ours = procfs_is_ours()) < 0)
        return XF_ERR;
    if (!ours) {
        *stage = XF_STAGE_INSIDE;
        return XF_OK;
    }
    /* a pid of our own pid namespace: a container init in another mount
     * namespace (prestart), or in ours (a container without a pid
     * namespace of its own, at createContainer) */
    snprintf(theirs, sizeof(theirs), "/proc/%d/ns/mnt", pid);
    if (stat("/proc/self/ns/mnt", &a) != 0 || stat(theirs, &b) != 0)
        return xf_say(XF_ERR, "container process %d: cannot read its mount namespace: %s (has it exited?)", pid,
                      strerror(errno));
    *stage = (a.st_dev == b.st_dev && a.st_ino == b.st_ino) ? XF_STAGE_SAME_MNT : XF_STAGE_JOIN;
    return XF_OK;
}
