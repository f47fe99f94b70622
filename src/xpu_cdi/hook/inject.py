"""Put the merged CDI edits into the container being created (prestart).

Order: plan everything from the runtime's mount namespace (``plan.py``;
open the cgroup), then join the container's mount namespace and
make device nodes, bind mounts, symlinks, the ld cache, and last allow the
devices in the cgroup.  Every change is journalled; if any step fails the
journal is rolled back and the hook fails, so the runtime never starts a
half-injected container.

Device nodes are made with mknod(2), not bind mounts of the host nodes:
the container's ``/dev`` is the runtime's private tmpfs, a node there
costs one syscall and no mount (a bind mount per node is one more mount
to set up, to tear down and to leak), and the node carries exactly the
spec's numbers and mode.  mknod is refused, or makes nodes nobody can
open, in a user namespace (the tmpfs is then mounted ``nodev`` by the
kernel); there, and whenever mknod gets EPERM, the host node is bound.
"""

from __future__ import annotations

import os
import stat

from .. import resolver
from ..errors import HookError, SyscallError
from . import cgroup, ldcache, links
from .plan import S_TYPES, plan
from .rootfs import Root, Undo, proc_fd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple

    from .state import Container

MS_NOSUID = 0x2
MS_REMOUNT, MS_BIND, MS_REC = 0x20, 0x1000, 0x4000
MNT_DETACH = 0x2
# statvfs f_flag bits of per-mount flags -> the MS_* flag that sets each
# (ST_RDONLY..ST_NOEXEC, ST_NOATIME, ST_NODIRATIME share the MS_* values)
_ST_TO_MS = ((0x1, 0x1), (0x2, 0x2), (0x4, 0x4), (0x8, 0x8), (0x400, 0x400), (0x800, 0x800),
             (0x1000, 1 << 21))  # ST_RELATIME -> MS_RELATIME
CLONE = {"mnt": 0x00020000, "cgroup": 0x02000000, "uts": 0x04000000, "ipc": 0x08000000,
         "user": 0x10000000, "pid": 0x20000000, "net": 0x40000000}


def same_ns(pid: int, name: str) -> bool:
    """Whether process *pid* is in our *name* namespace (``mnt``, ``user``...).

    Raises:
        HookError: its namespace cannot be read (gone, or not a host pid).
    """
    try:
        a, b = os.stat(f"/proc/self/ns/{name}"), os.stat(f"/proc/{pid}/ns/{name}")
    except OSError as err:
        raise HookError(f"container process {pid}: cannot read its {name} namespace: {err.strerror} "
                        f"(is the hook registered as prestart or createRuntime?)") from None
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _root_owner(pid: int) -> "Tuple[int, int]":
    """Host uid and gid that are root in the user namespace of *pid*."""
    ids = []
    for kind in ("uid", "gid"):
        try:
            with open(f"/proc/{pid}/{kind}_map") as f:
                lines = [line.split() for line in f]
        except OSError as err:
            raise HookError(f"container process {pid}: cannot read its {kind}_map: {err.strerror}") from None
        host = [int(outside) for inside, outside, count in lines if int(inside) == 0]
        if not host:
            raise HookError(f"container process {pid}: {kind} 0 is not mapped in its user namespace: "
                            f"the hook cannot create files the container's root owns")
        ids.append(host[0])
    return ids[0], ids[1]


def open_namespaces(pid: int) -> "List[Tuple[int, int]]":
    """``(fd, CLONE_NEW*)`` of the namespaces of *pid* that differ from ours
    (for the confined ldconfig); the caller closes the fds."""
    out = []
    for name in ("ipc", "uts", "net", "cgroup", "pid", "user"):
        if os.path.exists(f"/proc/{pid}/ns/{name}") and not same_ns(pid, name):
            out.append((os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), CLONE[name]))
    return out


def make_node(root: Root, n: "Dict[str, Any]", bind: bool) -> str:
    """Create device node *n* in the container (mknod, or bind the host node)."""
    cpath, kind = n["path"], n["type"]
    mode = int(n.get("fileMode") or 0o666) & 0o7777
    rdev = os.makedev(int(n["major"]), int(n["minor"]))
    parent, name = root.parent_of(cpath)
    try:
        if not bind:
            try:
                root.as_owner(os.mknod, name, S_TYPES[kind] | mode, rdev, dir_fd=parent)
            except PermissionError:
                bind = True  # e.g. a user namespace: bind the host node instead
            except FileExistsError:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_IFMT(st.st_mode) == S_TYPES[kind] and st.st_rdev == rdev:
                    return "exists"
                raise HookError(f"device node {cpath!r} already exists in the container and is not "
                                f"{kind} {n['major']}:{n['minor']}") from None
            else:
                keep = root.undo.keep_fd(os.dup(parent))
                root.undo.push(f"remove node {cpath!r}", os.unlink, name, dir_fd=keep)
                if n.get("uid") is not None or n.get("gid") is not None:
                    os.chown(name, int(n.get("uid", -1)), int(n.get("gid", -1)), dir_fd=parent,
                             follow_symlinks=False)
                return "mknod"
    finally:
        os.close(parent)
    src = _open_source(n["hostPath"], writable_ok=True)
    try:
        st = os.fstat(src)
        if stat.S_IFMT(st.st_mode) != S_TYPES[kind] or st.st_rdev != rdev:
            raise HookError(f"device node {cpath!r}: host node {n['hostPath']!r} is not "
                            f"{kind} {n['major']}:{n['minor']}")
        _bind(root, src, cpath, "f", MS_NOSUID, False)
    finally:
        os.close(src)
    return "bind"


def _open_source(host: str, writable_ok: bool = False) -> int:
    """O_PATH fd of a mount source, checked: root-owned and (unless
    *writable_ok*, for device nodes) not group/other-writable."""
    try:
        fd = os.open(host, os.O_PATH | os.O_CLOEXEC)
    except OSError as err:
        raise HookError(f"mount source {host!r}: {err.strerror}") from None
    st = os.fstat(fd)
    problem = ""
    if st.st_uid != 0:
        problem = f"is owned by uid {st.st_uid}, not root"
    elif not writable_ok and st.st_mode & 0o022:
        problem = f"is group- or world-writable (mode {oct(st.st_mode & 0o7777)})"
    if problem:
        os.close(fd)
        raise HookError(f"mount source {host!r} {problem}: refusing to expose it to containers; "
                        f"fix its ownership or mode")
    return fd


def _bind(root: Root, src: int, cpath: str, leaf: str, flags: int, recursive: bool) -> bool:
    """Bind *src* onto *cpath* (created as dir or file), then remount with
    *flags*; False when *cpath* already shows *src* (a runtime doing CDI
    itself got there first, or the hook is registered twice)."""
    target = root.ensure(cpath, leaf)
    a, b = os.fstat(target), os.fstat(src)
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        os.close(target)
        return False
    try:
        resolver.mount(proc_fd(src), proc_fd(target), None, MS_BIND | (MS_REC if recursive else 0))
    finally:
        os.close(target)
    # the O_PATH fd we mounted on names the covered inode: resolve again to
    # reach the new mount, and check it is what we bound
    top = root.undo.keep_fd(root.resolve(cpath))
    root.undo.push(f"unmount {cpath!r}", resolver.umount, proc_fd(top), MNT_DETACH)
    a, b = os.fstat(top), os.fstat(src)
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
        raise HookError(f"mount {cpath!r}: the bind mount is not where it was made (raced?)")
    if flags:
        # a bind remount replaces the mount's flags: keep those the source's
        # mount has (a nosuid/noexec/ro host filesystem stays so in the
        # container), which in a user namespace the kernel also demands (it
        # refuses to clear flags locked when the namespace was made)
        resolver.mount(None, proc_fd(top), None, MS_REMOUNT | MS_BIND | flags | source_flags(src))
    return True


def source_flags(src: int) -> int:
    """The MS_* per-mount flags of the mount *src* is on (statvfs f_flag).
    With none of the spec's atime options honoured, the atime flags passed
    are the source's, which is what the kernel keeps anyway."""
    have = os.fstatvfs(src).f_flag
    return sum(ms for st, ms in _ST_TO_MS if have & st)


def inject(c: "Container", edits: "Dict[str, List[Any]]") -> "List[str]":
    """Inject *edits* into container *c*; all or nothing.

    Returns:
        Notes for the log (what was done, what could not be).

    Raises:
        HookError: any step failed (everything done so far is undone).
    """
    p = plan(edits)
    if c.pid <= 1:
        raise HookError(f"OCI state pid {c.pid} is not a container process of this runtime: register "
                        f"`xpu-cdi-hook prestart` as a prestart or createRuntime hook")
    rules = [r for r in (cgroup.rule_of(n) for n in p.nodes) if r is not None]
    target = None
    namespaces: "List[Tuple[int, int]]" = []
    undo = Undo()
    old_umask = os.umask(0)
    notes = list(p.notes)
    step = "opening the container's cgroup"
    try:
        target = cgroup.open_target(c.pid) if rules else None
        userns = not same_ns(c.pid, "user")
        owner = _root_owner(c.pid) if userns else None
        namespaces = open_namespaces(c.pid) if p.folders else []
        step = "joining the container's mount namespace"
        if not same_ns(c.pid, "mnt"):
            resolver.setns(f"/proc/{c.pid}/ns/mnt", CLONE["mnt"])
        root = Root(c.rootfs, undo, owner)
        try:
            how = []
            for n in p.nodes:
                step = f"device node {n['path']!r}"
                how.append(make_node(root, n, userns))
            mounted = 0
            for host, cpath, flags, recursive in p.mounts:
                step = f"mount {host!r} -> {cpath!r}"
                src = _open_source(host)
                try:
                    leaf = "d" if stat.S_ISDIR(os.fstat(src).st_mode) else "f"
                    mounted += _bind(root, src, cpath, leaf, flags, recursive)
                finally:
                    os.close(src)
            step = "symlinks"
            made = links.create(root, p.links)
            if p.folders:
                step = "update-ldcache"
                notes.append(ldcache.update(root, p.folders, namespaces))
        finally:
            root.close()
        programs = 0
        if target is not None:
            step = "cgroup device rules"
            if target.version == 1:
                cgroup.allow_v1(target, rules)
            else:
                programs = cgroup.allow_v2(target, rules, undo)
        notes.insert(0, f"{len(how)} node(s) ({how.count('mknod')} mknod, {how.count('bind')} bind, "
                        f"{how.count('exists')} present), {mounted} mount(s) ({len(p.mounts) - mounted} present), "
                        f"{made} link(s), "
                        f"cgroup v{target.version if target else '-'}"
                        f"{f' ({programs} device program(s) replaced)' if programs else ''}")
    except (HookError, SyscallError, OSError) as err:
        failed = undo.rollback()
        msg = f"{step}: {err.strerror}" if isinstance(err, OSError) else str(err)
        if failed:
            msg += f" (and could not undo: {'; '.join(failed)})"
        raise HookError(msg) from None
    except BaseException:
        undo.rollback()
        raise
    finally:
        os.umask(old_umask)
        if target is not None:
            target.close()
        for fd, _ in namespaces:
            os.close(fd)
    undo.close()
    return notes
