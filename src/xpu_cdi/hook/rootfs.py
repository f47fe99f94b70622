"""Paths inside the container's rootfs, resolved the safe way, and the undo
journal of everything the hook changes there.

A container path is never handed to a path-based system call.  It is
resolved below an ``O_PATH`` fd of the rootfs (``openat2`` with
``RESOLVE_IN_ROOT``, or a component-by-component ``O_NOFOLLOW`` walk), so
an image whose ``/dev``, ``/usr/local`` or mount target is a symlink to
``/etc`` or ``../../..`` reaches a place *inside* the rootfs.  Missing
directories and files are created with ``*at()`` calls relative to the
resolved fds, and mounts go onto ``/proc/self/fd/N`` of the resolved target.
"""

from __future__ import annotations

import errno
import os
import stat

from .. import resolver
from ..errors import HookError, SyscallError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

O_PATH_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


class Undo:
    """Steps that take back what the hook did, run newest first on failure."""

    def __init__(self) -> None:
        self._steps: "List[Tuple[str, Callable[..., Any], Tuple[Any, ...], Dict[str, Any]]]" = []
        self._fds: "List[int]" = []

    def push(self, what: str, fn: "Callable[..., Any]", *args: "Any", **kwargs: "Any") -> None:
        """Remember *fn(*args, **kwargs)* as the way to undo *what*."""
        self._steps.append((what, fn, args, kwargs))

    def keep_fd(self, fd: int) -> int:
        """Keep *fd* open until the journal is closed (undo steps use it)."""
        self._fds.append(fd)
        return fd

    def rollback(self) -> "List[str]":
        """Run every undo step, newest first; return what could not be undone."""
        failed = []
        while self._steps:
            what, fn, args, kwargs = self._steps.pop()
            try:
                fn(*args, **kwargs)
            except (OSError, SyscallError) as err:
                failed.append(f"{what}: {err}")
        self.close()
        return failed

    def close(self) -> None:
        """Forget the steps (success) and close the fds they needed."""
        self._steps.clear()
        while self._fds:
            os.close(self._fds.pop())


def components(cpath: str) -> "List[str]":
    """The components of an absolute container path.

    Raises:
        HookError: relative, or with ``.``/``..``/empty components, or a NUL.
    """
    if not cpath.startswith("/") or "\0" in cpath:
        raise HookError(f"container path {cpath!r} must be absolute")
    parts = [c for c in cpath.split("/") if c]
    if any(c in (".", "..") for c in parts):
        raise HookError(f"container path {cpath!r} must not contain '.' or '..'")
    return parts


def proc_fd(fd: int) -> str:
    """The magic link naming *fd*, for calls that only take paths (mount)."""
    return f"/proc/self/fd/{fd}"


class Root:
    """The container's rootfs, opened once; every path is resolved inside it."""

    def __init__(self, path: str, undo: Undo, owner: "Optional[Tuple[int, int]]" = None) -> None:
        try:
            self.fd = os.open(path, O_PATH_DIR)
        except OSError as err:
            raise HookError(f"rootfs {path!r}: cannot open: {err.strerror}") from None
        self.path = path
        self.undo = undo
        # In a user namespace: the host uid/gid of the container's root.  What
        # the hook creates must belong to them (a filesystem mounted in the
        # namespace refuses inodes of unmapped ids with EOVERFLOW).
        self.owner = owner

    def as_owner(self, fn: "Callable[..., Any]", *args: "Any", **kwargs: "Any") -> "Any":
        """Run a creating call (mkdir, mknod, open O_CREAT, symlink) as the
        container's root would own its result: fs ids switched only for it."""
        if self.owner is None:
            return fn(*args, **kwargs)
        resolver.setfsids(*self.owner)
        try:
            return fn(*args, **kwargs)
        finally:
            resolver.setfsids(os.geteuid(), os.getegid())

    def close(self) -> None:
        """Close the rootfs fd."""
        os.close(self.fd)

    def resolve(self, cpath: str, nofollow: bool = False) -> int:
        """An ``O_PATH`` fd of *cpath* inside the rootfs (must exist).

        Raises:
            SyscallError: missing (ENOENT), a link loop (ELOOP), ...
        """
        return resolver.resolve_in_root(self.fd, cpath, resolver.RESOLVE_NOFOLLOW if nofollow else 0)

    def ensure(self, cpath: str, leaf: str) -> int:
        """An ``O_PATH`` fd of *cpath*, creating what is missing on the way.

        Missing directories are made 0755 and a missing last component a
        directory (``leaf="d"``) or an empty 0644 file (``leaf="f"``); each
        creation is journalled.  An existing last component of the wrong
        kind is an error.

        Raises:
            HookError: the wrong kind exists, or a link loop.
            SyscallError: a creation failed.
        """
        components(cpath)
        try:
            fd = self.resolve(cpath)
        except SyscallError as err:
            if err.errno != errno.ENOENT:
                raise
            from .. import _inroot  # the walk that creates what is missing, in-root

            try:
                fd = _inroot.walk(self.fd, cpath, create=self._creator(cpath, leaf))
            except OSError as err:
                raise SyscallError("resolve", err.errno or errno.EIO, cpath) from None
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        if is_dir != (leaf == "d"):
            os.close(fd)
            want = "a directory" if leaf == "d" else "a file (the source is a file)"
            raise HookError(f"container path {cpath!r} exists in the image but is not {want}")
        return fd

    def _creator(self, cpath: str, leaf: str) -> "Callable[[int, str, bool], None]":
        def create(dir_fd: int, name: str, last: bool) -> None:
            parent = self.undo.keep_fd(os.dup(dir_fd))
            if last and leaf == "f":
                fd = self.as_owner(os.open, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                                   os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
                os.close(fd)
                self.undo.push(f"remove file {name!r} made for {cpath!r}", os.unlink, name, dir_fd=parent)
            else:
                self.as_owner(os.mkdir, name, 0o755, dir_fd=dir_fd)
                self.undo.push(f"remove directory {name!r} made for {cpath!r}", os.rmdir, name, dir_fd=parent)

        return create

    def parent_of(self, cpath: str) -> "Tuple[int, str]":
        """``(fd of the parent directory, last component)`` of *cpath*,
        creating missing parent directories."""
        parts = components(cpath)
        if not parts:
            raise HookError(f"container path {cpath!r} names the root itself")
        return self.ensure("/" + "/".join(parts[:-1]), "d"), parts[-1]
