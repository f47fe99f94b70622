/* xpu-cdi-fast-test cgroup MODE: the device cgroup module, driven by
 * tests/native/test_cgroup.py.
 *
 *   locate MOUNTINFO_FILE CGROUP_FILE
 *       -> "<version> <dir>" (exit 0) | "DEFER <reason>" (exit 1)
 *   locate-batch
 *       stdin is a sequence of frames "<decimal byte count>\n<bytes>",
 *       taken in pairs (mountinfo, cgroup); one line per pair:
 *       "<version> <dir as hex>" | "DEFER <reason>"
 *   allow [--rollback] PID RULE...       RULE = TYPE:MAJOR:MINOR:ACCESS
 *       opens the device cgroup of PID (xf_cgroup_open) and allows the
 *       rules: "CGROUP <version> <dir>", then "OK <programs replaced>" |
 *       "DEFER <reason>" (exit 1).  With --rollback, after OK, the undo
 *       journal is run at once: "ROLLBACK <failed steps>[ <failures>]".
 *       A DEFER is always followed by the rollback (as the hook does). */
#include "cgroup.h"
#include "test_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_LIMIT (8u << 20)

static void print_reason(void)
{
    for (char *p = xf_reason; *p; p++)
        if (*p == '\n')
            *p = ' ';
    printf("DEFER %s\n", xf_reason);
}

static int locate_files(const char *mountinfo_file, const char *cgroup_file)
{
    char *mi, *cg;
    size_t mlen, clen;
    int version;
    const char *path;

    if (xf_read_file(mountinfo_file, FILE_LIMIT, &mi, &mlen, NULL) != XF_OK ||
        xf_read_file(cgroup_file, FILE_LIMIT, &cg, &clen, NULL) != XF_OK) {
        fprintf(stderr, "%s\n", xf_reason);
        return 2;
    }
    if (xf_cgroup_locate(mi, mlen, cg, clen, &version, &path) != XF_OK) {
        print_reason();
        return 1;
    }
    printf("%d %s\n", version, path);
    return 0;
}

static int locate_batch(void)
{
    for (;;) {
        char *mi, *cg;
        size_t mlen, clen;
        int rv = xf_test_next_frame(&mi, &mlen, FILE_LIMIT), version;
        const char *path;

        if (rv == 0)
            return 0;
        if (rv < 0 || xf_test_next_frame(&cg, &clen, FILE_LIMIT) != 1) {
            fprintf(stderr, "malformed frame\n");
            return 2;
        }
        if (xf_cgroup_locate(mi, mlen, cg, clen, &version, &path) != XF_OK) {
            print_reason();
            continue;
        }
        printf("%d ", version);
        for (const unsigned char *p = (const unsigned char *)path; *p; p++)
            printf("%02x", *p);
        printf("\n");
    }
}

/* TYPE:MAJOR:MINOR:ACCESS, given to the module as is (it judges them). */
static int parse_rule(const char *arg, struct xf_rule *r)
{
    char *end;

    memset(r, 0, sizeof(*r));
    if (arg[0] == '\0' || arg[1] != ':')
        return -1;
    r->type = arg[0];
    r->major = strtoll(arg + 2, &end, 10);
    if (*end != ':')
        return -1;
    r->minor = strtoll(end + 1, &end, 10);
    if (*end != ':' || strlen(end + 1) >= sizeof(r->access))
        return -1;
    strcpy(r->access, end + 1);
    return 0;
}

static void rollback(struct xf_undo *undo)
{
    const char *failed;
    size_t n = xf_undo_rollback(undo, &failed);

    printf("ROLLBACK %zu%s%s\n", n, failed ? " " : "", failed ? failed : "");
}

static int allow(int argc, char **argv)
{
    int undo_now = 0, pid, replaced = 0, rv;
    struct xf_rule *rules;
    struct xf_cgroup cg;
    struct xf_undo undo = {0};
    size_t n = 0;

    if (argc > 0 && strcmp(argv[0], "--rollback") == 0) {
        undo_now = 1;
        argc--, argv++;
    }
    if (argc < 1 || (pid = atoi(argv[0])) <= 0) {
        fprintf(stderr, "usage: cgroup allow [--rollback] PID TYPE:MAJOR:MINOR:ACCESS...\n");
        return 2;
    }
    rules = xf_alloc((size_t)argc * sizeof(*rules));
    for (int i = 1; i < argc; i++)
        if (parse_rule(argv[i], &rules[n++]) != 0) {
            fprintf(stderr, "bad rule %s\n", argv[i]);
            return 2;
        }
    if (xf_cgroup_open(pid, &cg) != XF_OK) {
        print_reason();
        return 1;
    }
    printf("CGROUP %d %s\n", cg.version, cg.path);
    rv = xf_cgroup_allow(&cg, rules, n, &undo, &replaced);
    if (rv != XF_OK) {
        print_reason();
        rollback(&undo);
    } else {
        printf("OK %d\n", replaced);
        if (undo_now)
            rollback(&undo);
        else
            xf_undo_close(&undo);
    }
    xf_cgroup_close(&cg);
    return rv == XF_OK ? 0 : 1;
}

int xf_test_cgroup(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "locate") == 0)
        return locate_files(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "locate-batch") == 0)
        return locate_batch();
    if (argc >= 2 && strcmp(argv[1], "allow") == 0)
        return allow(argc - 2, argv + 2);
    fprintf(stderr, "usage: xpu-cdi-fast-test cgroup locate MOUNTINFO CGROUP | locate-batch | "
                    "allow [--rollback] PID RULE...\n");
    return 2;
}
