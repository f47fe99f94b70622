"""The pure-Python in-root path walk (``os`` and ``stat`` only).

The twin of ``xc_walk_in_root`` in ``_native/hook.c``: resolve a path below a
directory fd component by component with ``O_PATH|O_NOFOLLOW`` opens, so
that an absolute symlink restarts at the root, ``..`` never climbs above
it and more than 40 links is ``ELOOP``.  ``_pyresolver.resolve_in_root``
uses it when the C extension is missing, and the hook uses it (with
*create*) to make missing mount targets inside the rootfs, wherever the
image's own symlinks lead.  Kept apart from ``_pyresolver`` so that the
hook's hot path imports nothing else.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

MAX_LINKS = 40  # the kernel's MAXSYMLINKS


def walk(rootfd: int, path: str, nofollow_last: bool = False,
         create: "Optional[Callable[[int, str, bool], None]]" = None) -> int:
    """An ``O_PATH``, ``O_CLOEXEC`` fd of *path* resolved inside *rootfd*.

    Args:
        rootfd: the root directory (any fd that names it).
        path: the path inside it, absolute or not.
        nofollow_last: return a symlink in the last component itself.
        create: called as ``create(dir_fd, name, is_last)`` for a component
            that does not exist (also behind a symlink) to make it; the
            walk then goes on through what was made.

    Raises:
        OSError: ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG... with the errno set.
    """
    root_st = os.fstat(rootfd)
    cur = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=rootfd)
    todo = [c for c in path.split("/") if c]
    todo.reverse()  # a stack: pop() takes the next component
    links = 0
    try:
        while todo:
            name = todo.pop()
            last = not todo
            if name == ".":
                continue
            if name == "..":
                st = os.fstat(cur)
                if (st.st_dev, st.st_ino) != (root_st.st_dev, root_st.st_ino):
                    nfd = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
                    os.close(cur)
                    cur = nfd
                continue
            if len(name.encode()) > 255:
                raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
            try:
                nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            except FileNotFoundError:
                if create is None:
                    raise
                create(cur, name, last)
                nfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            mode = os.fstat(nfd).st_mode
            if stat.S_ISLNK(mode) and not (last and nofollow_last):
                links += 1
                if links > MAX_LINKS:
                    os.close(nfd)
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                try:
                    target = os.readlink(name, dir_fd=cur)
                finally:
                    os.close(nfd)
                todo.extend(reversed([c for c in target.split("/") if c]))
                if target.startswith("/"):  # absolute: restart at the root, not the host's /
                    os.close(cur)
                    cur = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=rootfd)
                continue
            if not last and not stat.S_ISDIR(mode):
                os.close(nfd)
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            os.close(cur)
            cur = nfd
    except BaseException:
        os.close(cur)
        raise
    return cur
