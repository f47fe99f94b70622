"""``create-symlinks``: symlinks a profile asks for inside the container
(``--link TARGET::LINK``), made with ``symlinkat`` relative to the
resolved parent directory."""

from __future__ import annotations

import os

from ..errors import HookError
from .rootfs import Root, components

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Sequence, Tuple


def parse(specs: "Sequence[str]") -> "List[Tuple[str, str]]":
    """``TARGET::LINK`` strings -> ``(target, link)``.

    Raises:
        HookError: no ``::``, an empty part, or a relative LINK.
    """
    out = []
    for spec in specs:
        target, sep, link = spec.partition("::")
        if not sep or not target or not link or "\0" in spec:
            raise HookError(f"create-symlinks: --link {spec!r} must be TARGET::LINK")
        components(link)
        out.append((target, link))
    return out


def create(root: Root, links: "Sequence[Tuple[str, str]]") -> int:
    """Make each link; an existing link with the same target is fine.

    Returns:
        How many links were created.

    Raises:
        HookError: LINK exists and is something else.
    """
    made = 0
    for target, link in links:
        parent, name = root.parent_of(link)
        try:
            try:
                root.as_owner(os.symlink, target, name, dir_fd=parent)
            except FileExistsError:
                try:
                    current = os.readlink(name, dir_fd=parent)
                except OSError:
                    current = None
                if current != target:
                    raise HookError(f"create-symlinks: {link!r} already exists in the container "
                                    f"and is not a link to {target!r}") from None
                continue
            keep = root.undo.keep_fd(os.dup(parent))
            root.undo.push(f"remove link {link!r}", os.unlink, name, dir_fd=keep)
            made += 1
        except OSError as err:
            raise HookError(f"create-symlinks: cannot create {link!r}: {err.strerror}") from None
        finally:
            os.close(parent)
    return made
