"""A small inotify reader (libc through ctypes; the standard library has none).

Why inotify and not a stat poll: kubelet, when it restarts, deletes every
plugin socket and creates ``kubelet.sock`` anew.  A poll comparing inodes
misses a kubelet that is back within one interval (ext4 hands the freed
inode to the new socket), and a slower poll leaves pods failing admission
meanwhile.  inotify reports the delete and the create themselves.

Watches are on directories (a file's watch dies with the file); events are
``(directory, name, mask)``.  Where inotify is unavailable, :func:`open_inotify`
returns None and the daemon polls only.
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Dict, List, Optional, Tuple

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

# everything that changes which entries a directory has, or a file's content
DIR_CHANGES = (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB
               | IN_DELETE_SELF | IN_MOVE_SELF)
_HEADER = struct.Struct("iIII")

Event = Tuple[str, str, int]  # (directory, entry name or "", mask)


class Inotify:
    """One inotify instance watching directories."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd, self._libc = fd, libc
        self._dirs: Dict[int, str] = {}  # watch descriptor -> directory

    def fileno(self) -> int:
        return self.fd

    def watch(self, directory: str, mask: int = DIR_CHANGES) -> bool:
        """Watch *directory* (again: a re-created directory needs a new watch); False if it cannot be watched."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(directory), mask | IN_ONLYDIR)
        if wd < 0:
            return False
        self._dirs[wd] = directory
        return True

    def watched(self) -> List[str]:
        return sorted(set(self._dirs.values()))

    def read(self) -> List[Event]:
        """The events queued now (never blocks); an overflow is reported as ``("", "", IN_Q_OVERFLOW)``."""
        out: List[Event] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            if not data:
                return out
            pos = 0
            while pos + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
                raw = data[pos + _HEADER.size:pos + _HEADER.size + length]
                pos += _HEADER.size + length
                name = os.fsdecode(raw.rstrip(b"\0"))
                directory = self._dirs.get(wd, "")
                if mask & IN_IGNORED:
                    self._dirs.pop(wd, None)  # the directory went away: the daemon watches it again later
                out.append((directory, name, mask))

    def close(self) -> None:
        os.close(self.fd)


def open_inotify() -> Optional[Inotify]:
    """A non-blocking inotify instance, or None where the kernel or libc has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    return Inotify(fd, libc)
