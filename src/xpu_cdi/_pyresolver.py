"""Pure-Python twin of ``_native/resolver.c``, used only when the compiled
extension cannot be loaded.  Results must be identical: tests compare them."""

from __future__ import annotations

import os
import re
import stat as _stat
from typing import List, Optional, Sequence, Tuple

Row = Tuple[int, str, int, int, int, int, int]
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")


def _type_of(mode: int) -> str:
    if _stat.S_ISCHR(mode):
        return "c"
    if _stat.S_ISBLK(mode):
        return "b"
    if _stat.S_ISREG(mode):
        return "-"
    if _stat.S_ISDIR(mode):
        return "d"
    return "?"


def stat_nodes(paths: Sequence[str]) -> List[Row]:
    """Stat each path (following links); see resolver.stat_nodes."""
    rows: List[Row] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as err:
            rows.append((err.errno or 0, "\0", 0, 0, 0, 0, 0))
            continue
        rows.append((0, _type_of(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev),
                     st.st_mode & 0o7777, st.st_uid, st.st_gid))
    return rows


def pci_of(sysfs_root: str, major: int, minor: int) -> Tuple[Optional[str], Optional[int]]:
    """PCI address and NUMA node of a char device; see resolver.pci_of."""
    root = "" if sysfs_root == "/" else sysfs_root
    link = f"{root}/sys/dev/char/{major}:{minor}/device"
    if not os.path.exists(link):
        return None, None
    real = os.path.realpath(link)
    base = os.path.basename(real)
    if not _PCI.match(base):
        return None, None
    numa: Optional[int] = None
    try:
        with open(os.path.join(real, "numa_node")) as f:
            text = f.read(31).strip()
        value = int(text)
        numa = value if value >= 0 else None
    except (OSError, ValueError):
        pass
    return base, numa


# ---------------------------------------------------------------------------
# Hook section: twins of _native/hook.c (see resolver.py for the contract).
# Python 3.11's os has no setns/mount, so those go through libc via ctypes,
# imported only here, on the slow path.
# ---------------------------------------------------------------------------

_RESOLVE_NOFOLLOW = 2


def _syscall_error(call: str, err: int, target: str) -> Exception:
    from .errors import SyscallError

    return SyscallError(call, err, target)


def resolve_in_root(rootfd: int, path: str, flags: int = 0) -> int:
    """Component-by-component walk below *rootfd* (``_inroot.walk``); see
    resolver.resolve_in_root."""
    from . import _inroot

    try:
        return _inroot.walk(rootfd, path, nofollow_last=bool(flags & _RESOLVE_NOFOLLOW))
    except OSError as err:
        raise _syscall_error("resolve", err.errno or 5, path) from None


def _libc():  # type: ignore[no-untyped-def]
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def setns(nspath: str, nstype: int) -> None:
    """setns(2) through libc; see resolver.setns."""
    import ctypes

    try:
        fd = os.open(nspath, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise _syscall_error("setns", err.errno or 5, nspath) from None
    try:
        if _libc().setns(fd, nstype) != 0:
            raise _syscall_error("setns", ctypes.get_errno(), nspath)
    finally:
        os.close(fd)


def setfsids(uid: int, gid: int) -> None:
    """setfsgid + setfsuid through libc; see resolver.setfsids."""
    libc = _libc()
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    if libc.setfsgid(-1) != gid or libc.setfsuid(-1) != uid:
        raise _syscall_error("setfsuid", 1, f"{uid}:{gid}")


def mount(source: Optional[str], target: str, fstype: Optional[str], flags: int,
          data: Optional[str] = None) -> None:
    """mount(2) through libc; see resolver.mount."""
    import ctypes

    enc = (lambda s: s.encode() if s else None)
    if _libc().mount(enc(source), target.encode(), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        raise _syscall_error("mount", ctypes.get_errno(), f"{source or ''} -> {target}")


def umount(target: str, flags: int = 0) -> None:
    """umount2(2) through libc; see resolver.umount."""
    import ctypes

    if _libc().umount2(target.encode(), flags) != 0:
        raise _syscall_error("umount", ctypes.get_errno(), target)


def spawn_confined(root: str, argv: Sequence[str], env: Sequence[str],
                   namespaces: Sequence[Tuple[int, int]] = (), timeout: float = 30.0) -> Tuple[int, str]:
    """fork+exec confined as resolver.spawn_confined does (libc via ctypes)."""
    import ctypes
    import signal
    import time

    libc = _libc()
    newpid, newuser = 0x20000000, 0x10000000
    errr, errw = os.pipe2(os.O_CLOEXEC)
    outr, outw = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):  # as C's reset_signals
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
            ordered = [n for n in namespaces if n[1] not in (newpid, newuser)] + \
                [n for n in namespaces if n[1] == newpid] + [n for n in namespaces if n[1] == newuser]
            for fd, kind in ordered:
                if libc.setns(fd, kind) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
                if kind == newuser:
                    os.setgroups([])
                    os.setresgid(0, 0, 0)
                    os.setresuid(0, 0, 0)
            if any(kind == newpid for _, kind in namespaces):
                inner = os.fork()
                if inner:
                    os.close(errw)
                    os.close(outw)
                    os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]) & 0xFF)
                libc.prctl(1, signal.SIGKILL, 0, 0, 0)
            os.chroot(root)
            os.chdir("/")
            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
                raise OSError(ctypes.get_errno(), "prctl")
            for cap in range(64):
                if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # PR_CAPBSET_DROP
                    raise OSError(ctypes.get_errno(), "prctl")
            libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
            hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
            data = (ctypes.c_uint32 * 6)()
            if libc.capset(hdr, data) != 0:
                raise OSError(ctypes.get_errno(), "capset")
            try:
                os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
            except OSError:  # no /dev/null in the root: stdin is a closed pipe end, as in C
                os.dup2(outw, 0)
            os.dup2(outw, 1)
            os.dup2(outw, 2)
            os.closerange(3, errw)
            os.closerange(errw + 1, 65536)
            os.execve(argv[0], list(argv), dict(e.split("=", 1) for e in env))
        except OSError as err:
            os.write(errw, (err.errno or 5).to_bytes(4, "little"))
        os._exit(127)
    os.close(errw)
    os.close(outw)
    failed = os.read(errr, 4)
    os.close(errr)
    chunks = []
    total = 0
    deadline = time.monotonic() + timeout
    import select as _select

    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not _select.select([outr], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            failed = (110).to_bytes(4, "little")  # ETIMEDOUT
            break
        chunk = os.read(outr, 4096)
        if not chunk:
            break
        if total < 4095:
            chunks.append(chunk[:4095 - total])
            total += len(chunks[-1])
    os.close(outr)
    _, status = os.waitpid(pid, 0)
    if len(failed) == 4:
        raise _syscall_error("exec", int.from_bytes(failed, "little"), f"{argv[0]} in {root}")
    return status, b"".join(chunks).decode(errors="replace")
