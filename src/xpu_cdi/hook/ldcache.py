"""``update-ldcache``: make the driver libraries known to the image's
dynamic loader.

We write an ``ld.so.conf.d`` entry (so a later ``ldconfig`` in the
container keeps the directories) and run the image's own ``ldconfig`` with
the directories as arguments, chrooted into the rootfs.  The image's binary
is untrusted: it runs confined (``resolver.spawn_confined``: the
container's namespaces including its pid namespace, chroot, no_new_privs,
no capabilities, no inherited fds, only ``PATH`` in its environment).
Images without ``ldconfig`` (busybox, alpine's musl, distroless) are
skipped: their loaders do not read ``ld.so.cache``.
"""

from __future__ import annotations

import errno
import os
import stat

from .. import resolver
from ..errors import HookError, SyscallError
from .rootfs import Root, proc_fd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

LDCONFIG = ("/sbin/ldconfig", "/usr/sbin/ldconfig", "/bin/ldconfig", "/usr/bin/ldconfig")
CONF = "/etc/ld.so.conf.d/00-xpu-cdi.conf"
ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
TIMEOUT = 30.0


def find_ldconfig(root: Root) -> "Optional[str]":
    """The container path of the image's ldconfig (an executable regular
    file, symlinks resolved inside the rootfs), or None."""
    for path in LDCONFIG:
        try:
            fd = root.resolve(path)
        except SyscallError:
            continue
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            return path
    return None


def existing_dirs(root: Root, folders: "Sequence[str]") -> "List[str]":
    """The *folders* that are directories inside the rootfs."""
    out = []
    for folder in folders:
        try:
            fd = root.resolve(folder)
        except SyscallError:
            continue
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode) and folder not in out:
                out.append(folder)
        finally:
            os.close(fd)
    return out


def _open_existing(name: str, parent: int) -> int:
    """Our entry from an earlier start, opened for rewriting only when it is
    a regular file.  The image decides what is there: a device node (the
    host's disk, a watchdog -- even open(2) of those acts on the host, and
    the hook is root in the host's device cgroup), a fifo (open blocks), a
    symlink.  So: an O_PATH fd (opens nothing), fstat it, and reopen that
    very inode through /proc/self/fd (a rename after the check cannot
    redirect the open)."""
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        mode = os.fstat(path_fd).st_mode
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        if not stat.S_ISREG(mode):
            raise HookError(f"{CONF!r} in the image is not a regular file: refusing to write it")
        return os.open(proc_fd(path_fd), os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY | os.O_CLOEXEC)
    finally:
        os.close(path_fd)


def write_conf(root: Root, folders: "Sequence[str]") -> None:
    """Write (or replace) our ld.so.conf.d entry inside the rootfs."""
    parent, name = root.parent_of(CONF)
    try:
        created = False
        try:
            fd = root.as_owner(os.open, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o644, dir_fd=parent)
            created = True
        except FileExistsError:  # ours from an earlier start of this container
            fd = _open_existing(name, parent)
        try:
            os.write(fd, ("# written by xpu-cdi-hook update-ldcache\n" + "\n".join(folders) + "\n").encode())
        finally:
            os.close(fd)
        if created:
            keep = root.undo.keep_fd(os.dup(parent))
            root.undo.push(f"remove {CONF!r}", os.unlink, name, dir_fd=keep)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise HookError(f"{CONF!r} in the image is a symlink: refusing to write through it") from None
        raise HookError(f"cannot write {CONF!r} in the container: {err.strerror}") from None
    finally:
        os.close(parent)


def update(root: Root, folders: "Sequence[str]", namespaces: "Sequence[Tuple[int, int]]" = ()) -> str:
    """Register *folders* with the image's dynamic loader.

    Args:
        root: the container's rootfs (we are in its mount namespace).
        folders: library directories (container paths).
        namespaces: ``(fd, CLONE_NEW*)`` for ldconfig to join (empty when
            the hook already runs inside the container's namespaces).

    Returns:
        A one-line note of what was done.

    Raises:
        HookError: ldconfig failed or could not be started.
    """
    for folder in folders:
        if not folder.startswith("/"):
            raise HookError(f"update-ldcache: --folder {folder!r} must be an absolute container path")
    ldconfig = find_ldconfig(root)
    if ldconfig is None:
        return "no ldconfig in the image: ld cache left alone"
    dirs = existing_dirs(root, folders)
    if not dirs:
        return "none of the library folders exist in the container: ld cache left alone"
    write_conf(root, dirs)
    try:
        status, output = resolver.spawn_confined(proc_fd(root.fd), [ldconfig, *dirs], ENV, namespaces, TIMEOUT)
    except SyscallError as err:
        raise HookError(f"update-ldcache: cannot run the image's {ldconfig}: {err}") from None
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        last = (output.strip().splitlines() or ["no output"])[-1]
        raise HookError(f"update-ldcache: the image's {ldconfig} exited with {code}: {last}")
    return f"ld cache updated for {', '.join(dirs)}"
