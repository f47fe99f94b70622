/* The privileged test: see privileged.h. */
#include "lib/privileged.h"

#include <string.h>

static const char *const CAPS[] = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
    "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
    "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
};

int xf_privileged(const fj *config)
{
    const fj *bounding = fj_get(fj_get(fj_get(config, "process"), "capabilities"), "bounding");

    if (bounding == NULL || bounding->type != FJ_ARRAY)
        return 0;
    for (size_t c = 0; c < sizeof(CAPS) / sizeof(CAPS[0]); c++) {
        int found = 0;
        for (size_t i = 0; i < bounding->n && !found; i++)
            found = fj_str(bounding->items[i]) != NULL && strcmp(bounding->items[i]->str, CAPS[c]) == 0;
        if (!found)
            return 0;
    }
    return 1;
}
