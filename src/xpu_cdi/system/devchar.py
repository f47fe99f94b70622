"""The ``/dev/char/<major>:<minor>`` links of every card, companion and control node the
profiles find (``xpu-cdi system create-dev-char-symlinks``).

runc's systemd cgroup driver turns a container's device rules into device
paths through these links (systemd takes paths, not numbers).  udev makes
them for the nodes it announced; a node a vendor script made with mknod, or
a ``/dev`` without udev, has none, and a ``systemctl daemon-reload`` or a
driver reload then silently takes the device away from running containers.
NVIDIA's ``nvidia-ctk system create-dev-char-symlinks`` answers the same
problem for its nodes; this is the same idea for our profiles.
"""

from __future__ import annotations

import errno
import os
from typing import List, Sequence, Tuple

from ..atomic import temp_name
from ..errors import HostSetupError
from ..generate.discover import Roots, host_path
from ..model import HostView

Link = Tuple[str, str]  # (link path, target relative to the link's directory)


def wanted(views: Sequence[HostView], roots: Roots) -> List[Link]:
    """The links the character nodes of *views* need, one per major:minor, in node order."""
    base = host_path(roots.dev, "/dev/char")
    out: List[Link] = []
    seen = set()
    for view in views:
        nodes = [n for c in view.cards for n in c.nodes] + list(view.shared_nodes)
        for node in nodes:
            info = node.host
            key = (info.major, info.minor)
            if info.type != "c" or key in seen:
                continue
            seen.add(key)
            out.append((os.path.join(base, f"{info.major}:{info.minor}"), os.path.relpath(info.path, base)))
    return out


def missing(links: Sequence[Link]) -> List[Link]:
    """Those of *links* that are absent or point elsewhere."""
    out = []
    for link, target in links:
        want = os.path.normpath(os.path.join(os.path.dirname(link), target))
        if not os.path.islink(link) or os.path.realpath(link) != os.path.realpath(want):
            out.append((link, target))
    return out


def create(link: str, target: str) -> None:
    """Create (or replace) *link* atomically: a new link under a temp name, then rename.

    Raises:
        HostSetupError: it cannot be made (not root, a read-only /dev, ...).
    """
    tmp = temp_name(link)
    try:
        os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
        os.symlink(target, tmp)
        os.replace(tmp, link)
    except OSError as err:
        if os.path.islink(tmp):
            os.unlink(tmp)
        advice = ": run as root" if err.errno in (errno.EACCES, errno.EPERM) else ""
        raise HostSetupError(f"cannot create {link!r}: {err.strerror}{advice}") from err
