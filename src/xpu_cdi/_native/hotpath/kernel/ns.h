/* Namespaces, filesystem ids and mount(2) (ns.c).  0 or -errno. */
#ifndef XF_NS_H
#define XF_NS_H

int xc_setfsids(unsigned int uid, unsigned int gid);
int xc_mount(const char *source, const char *target, const char *fstype,
             unsigned long flags, const char *data);
int xc_umount(const char *target, int flags);

#endif
