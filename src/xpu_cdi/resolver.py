"""Python face of the C resolver (``_native/resolver.c``).

This is the only module that imports the compiled ``_resolver``; when it
cannot be loaded the pure-Python twin in ``_pyresolver`` is used and a
one-line notice goes to stderr.  Both return identical results.
"""

from __future__ import annotations

import sys

# The hook imports this module on every injecting container start: typing
# and _pyresolver (re, typing) would cost milliseconds there, so typing is
# for the type checker only and the pure-Python twin loads on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

    Row = Tuple[int, str, int, int, int, int, int]
else:
    Row = tuple


class _LazyModule:
    """``_pyresolver``, imported when a fallback is first called."""

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        from . import _pyresolver as module

        return getattr(module, name)


_pyresolver = _LazyModule()

try:
    from ._native._resolver import ffi, lib  # type: ignore[import-not-found]

    BACKEND = "c"
except ImportError as _err:  # pragma: no cover - exercised by a subprocess test
    ffi = lib = None
    BACKEND = "python"
    print(f"xpu-cdi: C resolver unavailable ({_err}); using the pure-Python resolver",
          file=sys.stderr)


def stat_nodes(paths: Sequence[str]) -> List[Row]:
    """Stat many host paths in one call.

    Args:
        paths: absolute host paths (symlinks are followed).

    Returns:
        One row per path: ``(errno, type, major, minor, mode, uid, gid)``.
        ``errno`` is 0 on success; ``type`` is ``"c"``, ``"b"``, ``"-"``
        (regular file), ``"d"`` or ``"?"`` (and ``"\\0"`` on error).
    """
    if lib is None or not paths:
        return _pyresolver.stat_nodes(paths)
    blob = ("\0".join(paths) + "\0").encode()
    n = len(paths)
    out = ffi.new("long long[]", n * 6)
    types = ffi.new("char[]", n)
    rv = lib.xc_stat_nodes(blob, n, out, types)
    if rv != 0:  # only -ENOMEM for the scratch array: let Python try
        return _pyresolver.stat_nodes(paths)
    # column-major results -> rows with zip over array slices: no per-row bytecode
    import array  # here, not at the top: the hook never stats in bulk and array pulls in collections

    flat = array.array("q")
    flat.frombytes(ffi.buffer(out))
    typ = ffi.unpack(types, n).decode("ascii").replace("!", "\0")
    return list(zip(flat[0:n], typ, flat[n:2 * n], flat[2 * n:3 * n], flat[3 * n:4 * n],
                    flat[4 * n:5 * n], flat[5 * n:6 * n]))


def pci_of(sysfs_root: str, major: int, minor: int) -> Tuple[Optional[str], Optional[int]]:
    """PCI address and NUMA node of a character device, from sysfs.

    Args:
        sysfs_root: the root under which ``sys/dev/char`` is read (``/`` on a host).
        major, minor: the device numbers.

    Returns:
        ``(pci_address, numa_node)``; either is ``None`` when unknown.
    """
    if lib is None:
        return _pyresolver.pci_of(sysfs_root, major, minor)
    buf = ffi.new("char[]", 64)
    numa = ffi.new("int *")
    rv = lib.xc_pci_of(sysfs_root.encode(), major, minor, buf, 64, numa)
    if rv != 0:
        return None, None
    pci = ffi.string(buf).decode()
    return (pci or None), (numa[0] if numa[0] >= 0 else None)


# ---------------------------------------------------------------------------
# Hook section (``_native/hook.c``): namespaces, in-root path resolution,
# mount(2), a confined fork+exec and cgroup v2 device programs, for
# ``xpu-cdi-hook``.  Each call raises :class:`~xpu_cdi.errors.SyscallError`
# naming the call and its target.  The pure-Python twins in ``_pyresolver``
# give the same answers (ctypes for setns/mount); loading BPF programs has
# no fallback.
# ---------------------------------------------------------------------------

RESOLVE_NO_OPENAT2 = 1  # force the component walk (tests compare it with openat2)
RESOLVE_NOFOLLOW = 2  # a symlink as the last component is returned itself


def _fail(call: str, rv: int, target: str) -> None:
    from .errors import SyscallError

    raise SyscallError(call, -rv, target)


def setns(nspath: str, nstype: int) -> None:
    """Join the namespace behind *nspath* (``/proc/PID/ns/mnt``...).

    Raises:
        SyscallError: the namespace cannot be opened or joined.
    """
    if lib is None:
        return _pyresolver.setns(nspath, nstype)
    rv = lib.xc_setns(nspath.encode(), nstype)
    if rv != 0:
        _fail("setns", rv, nspath)


def setfsids(uid: int, gid: int) -> None:
    """Set the filesystem uid and gid (setfsgid, setfsuid).

    Raises:
        SyscallError: they did not take (no CAP_SETUID/CAP_SETGID).
    """
    if lib is None:
        return _pyresolver.setfsids(uid, gid)
    rv = lib.xc_setfsids(uid, gid)
    if rv != 0:
        _fail("setfsuid", rv, f"{uid}:{gid}")


def resolve_in_root(rootfd: int, path: str, flags: int = 0) -> int:
    """An ``O_PATH`` fd of *path* resolved inside the directory *rootfd*.

    Absolute symlinks restart at *rootfd*, ``..`` never climbs above it,
    and more than 40 symlinks is ``ELOOP``.

    Args:
        rootfd: an ``O_PATH`` (or readable) directory fd: the root.
        path: the path inside it ("/usr/local/xpu").
        flags: ``RESOLVE_NOFOLLOW`` and/or ``RESOLVE_NO_OPENAT2``.

    Returns:
        A new ``O_CLOEXEC`` fd; the caller closes it.

    Raises:
        SyscallError: a component is missing (ENOENT), not a directory,
            a link loop (ELOOP), a name too long.
    """
    if lib is None:
        return _pyresolver.resolve_in_root(rootfd, path, flags)
    out = ffi.new("int *")
    rv = lib.xc_resolve_in_root(rootfd, path.encode(), flags, out)
    if rv != 0:
        _fail("resolve", rv, path)
    return int(out[0])


def mount(source: Optional[str], target: str, fstype: Optional[str], flags: int, data: Optional[str] = None) -> None:
    """mount(2).

    Raises:
        SyscallError: the kernel refused.
    """
    if lib is None:
        return _pyresolver.mount(source, target, fstype, flags, data)
    rv = lib.xc_mount(source.encode() if source else ffi.NULL, target.encode(),
                      fstype.encode() if fstype else ffi.NULL, flags, data.encode() if data else ffi.NULL)
    if rv != 0:
        _fail("mount", rv, f"{source or ''} -> {target}")


def umount(target: str, flags: int = 0) -> None:
    """umount2(2).

    Raises:
        SyscallError: the kernel refused.
    """
    if lib is None:
        return _pyresolver.umount(target, flags)
    rv = lib.xc_umount(target.encode(), flags)
    if rv != 0:
        _fail("umount", rv, target)


def spawn_confined(root: str, argv: Sequence[str], env: Sequence[str],
                   namespaces: Sequence[Tuple[int, int]] = (), timeout: float = 30.0) -> Tuple[int, str]:
    """Run *argv* chrooted into *root*, confined, and wait for it.

    The child joins *namespaces* (``(fd, CLONE_NEW*)``; inside a pid
    namespace through one more fork; a user namespace last, then uid/gid 0
    inside it), chroots, sets no_new_privs, drops every capability, keeps
    no other fd, gets exactly *env*, dies with the caller and is killed
    after *timeout* seconds.

    Returns:
        ``(waitpid status, stdout+stderr truncated to 4 KiB)``.

    Raises:
        SyscallError: a step before exec failed (``exec`` ENOENT when the
            program is missing), or ETIMEDOUT.
    """
    if lib is None:
        return _pyresolver.spawn_confined(root, argv, env, namespaces, timeout)
    out = ffi.new("char[]", 4096)
    status = ffi.new("int *")
    fds = ffi.new("int[]", [fd for fd, _ in namespaces] or [0])
    types = ffi.new("int[]", [t for _, t in namespaces] or [0])
    rv = lib.xc_spawn_confined(root.encode(), ("\0".join(argv) + "\0").encode(), len(argv),
                               ("\0".join(env) + "\0").encode(), len(env), fds, types, len(namespaces),
                               int(timeout * 1000), out, 4096, status)
    if rv != 0:
        _fail("exec", rv, f"{argv[0]} in {root}")
    return int(status[0]), ffi.string(out).decode(errors="replace")


def bpf_dev_query(cgfd: int) -> Tuple[List[int], int]:
    """The ids and attach flags of the device programs on a cgroup v2 dir.

    Raises:
        SyscallError: BPF_PROG_QUERY failed (EPERM, EINVAL on cgroup v1).
    """
    if lib is None:
        _fail("bpf", -38, "BPF_PROG_QUERY (needs the C extension)")
    ids = ffi.new("unsigned int[]", 64)
    count = ffi.new("size_t *")
    flags = ffi.new("unsigned int *")
    rv = lib.xc_bpf_dev_query(cgfd, ids, 64, count, flags)
    if rv != 0:
        _fail("bpf", rv, "BPF_PROG_QUERY")
    return [int(ids[i]) for i in range(min(int(count[0]), 64))], int(flags[0])


def bpf_dev_patch(cgfd: int, prog_id: int, attach_flags: int,
                  rules: Sequence[Tuple[int, int, int, int]]) -> Tuple[int, int]:
    """Replace program *prog_id* by a copy that also allows *rules*.

    Args:
        rules: ``(type, major, minor, access)``: type 2 char, 1 block, 0 any;
            ``0xffffffff`` for any number; access bits 1 mknod, 2 read, 4 write.

    Returns:
        ``(old_fd, new_fd)`` for :func:`bpf_dev_restore`; the caller closes both.

    Raises:
        SyscallError: the program cannot be read, loaded (the verifier's
            last line is in the message) or attached.
    """
    if lib is None:
        _fail("bpf", -38, "BPF_PROG_LOAD (needs the C extension)")
    words = [w for r in rules for w in r]
    arr = ffi.new("unsigned int[]", words or [0])
    old_fd, new_fd = ffi.new("int *"), ffi.new("int *")
    log = ffi.new("char[]", 1 << 16)
    rv = lib.xc_bpf_dev_patch(cgfd, prog_id, attach_flags, arr, len(rules), old_fd, new_fd, log, 1 << 16)
    if rv != 0:
        lines = ffi.string(log).decode(errors="replace").strip().splitlines()
        _fail("bpf", rv, f"device program {prog_id}" + (f" (verifier: {lines[-1]})" if lines else ""))
    return int(old_fd[0]), int(new_fd[0])


def bpf_dev_restore(cgfd: int, old_fd: int, new_fd: int, attach_flags: int) -> None:
    """Attach *old_fd* again in place of *new_fd*.

    Raises:
        SyscallError: the kernel refused.
    """
    if lib is None:
        _fail("bpf", -38, "BPF_PROG_ATTACH (needs the C extension)")
    rv = lib.xc_bpf_dev_restore(cgfd, old_fd, new_fd, attach_flags)
    if rv != 0:
        _fail("bpf", rv, "BPF_PROG_ATTACH (restore)")
