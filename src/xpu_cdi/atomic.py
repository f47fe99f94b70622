"""Atomic file replacement: readers see the old file or the new one, never half.

Used for CDI specs and their hook indexes (runtimes and the hook read them
concurrently), runtime configs, the watch manifest and the device plugin's
status file.  (The compiled wrapper writes ``config.json`` the same way, in C.)
"""

from __future__ import annotations

import os

TMP_MARK = ".xpu-cdi-tmp"  # CDI readers only look at *.json / *.yaml: temp names end otherwise


def temp_name(path: str) -> str:
    """The temp file used while replacing *path* (same dir, ignored suffix)."""
    d, base = os.path.split(path)
    return os.path.join(d, f".{base}.{os.getpid()}{TMP_MARK}")


def write_atomic(path: str, data: bytes, mode: int = 0o644, durable: bool = True) -> None:
    """Replace *path* with *data*: temp file in the same dir, fsync, rename, fsync dir.

    The new file is owned by the writer and has exactly *mode* (the umask
    does not apply).

    Args:
        durable: fsync the file and the directory, and remove temp files an
            earlier, killed writer left.  False for files rewritten often whose
            loss in a crash costs nothing (the device plugin's status file,
            which the daemon writes again when it starts).

    Raises:
        OSError: the directory is not writable, the disk is full, ...
    """
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        try:
            os.fchmod(fd, mode)  # O_CREAT's mode is filtered by the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    remove_stale_temps(path)


def remove_stale_temps(path: str) -> None:
    """Remove temp files an earlier, killed writer of *path* left behind."""
    d, base = os.path.split(path)
    prefix = f".{base}."
    try:
        names = os.listdir(d or ".")
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(TMP_MARK):
            pid = name[len(prefix):-len(TMP_MARK)]
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                try:
                    os.unlink(os.path.join(d, name))
                except OSError:
                    pass


def pid_alive(pid: int) -> bool:
    """Whether process *pid* exists (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
