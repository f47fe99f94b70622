"""Paths under the three host roots and what sits at them: the helpers
discovery, its companion-node step and every other reader of the host
(topology, the cards' models and links, the node daemons) share."""

from __future__ import annotations

import os
import stat as _stat
from typing import List, NamedTuple, Sequence

from . import hoststat
from .errors import DiscoveryError
from .model import NodeInfo, Profile

_TYPE_NAMES = {"-": "a regular file", "d": "a directory", "l": "a symlink", "?": "not a device node"}


class Roots(NamedTuple):
    """Where the host's /dev, driver files and /sys are (``/`` on a real host)."""

    dev: str = "/"
    driver: str = "/"
    sysfs: str = "/"


def host_path(root: str, path: str) -> str:
    """*path* (absolute, as on a host) under *root*."""
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def read_head(path: str, limit: int = 256) -> str:
    """The first *limit* characters of a small host file (a version, a uuid), stripped; "" when unreadable."""
    try:
        with open(path, errors="replace") as f:
            return f.read(limit).strip()
    except OSError:
        return ""


def container_path(root: str, hostp: str) -> str:
    """The host path *hostp* (under *root*) as the host itself names it."""
    if root in ("", "/"):
        return hostp
    return "/" + os.path.relpath(hostp, root)


def has_magic(path: str) -> bool:
    """Whether *path* is a glob."""
    return any(c in path for c in "*?[")


def node_kind(hostp: str) -> str:
    """``c``/``b`` for a device node, else what it is (``d``, ``l``, ``-``, ``?``); ``""`` when absent."""
    try:
        st = os.lstat(hostp)
    except OSError:
        return ""
    if _stat.S_ISLNK(st.st_mode):
        return "l"
    if _stat.S_ISCHR(st.st_mode):
        return "c"
    if _stat.S_ISBLK(st.st_mode):
        return "b"
    return "d" if _stat.S_ISDIR(st.st_mode) else "-" if _stat.S_ISREG(st.st_mode) else "?"


def not_a_node(shown: str, kind: str) -> str:
    """The note for a glob match that is not a device node."""
    return f"{shown!r} is {_TYPE_NAMES.get(kind, 'not a device node')}, not a device node: skipped"


def stat_all(paths: Sequence[str], profile: Profile) -> List[NodeInfo]:
    """Major, minor, mode and owner of device nodes already known to be nodes.

    Raises:
        DiscoveryError: a node vanished or changed type since it was listed.
    """
    infos = []
    for path, row in zip(paths, hoststat.stat_nodes(paths)):
        err, typ, major, minor, mode, uid, gid = row
        if err:
            raise DiscoveryError(f"profile {profile.name!r}: cannot stat {path!r}: {os.strerror(err)}")
        if typ not in ("c", "b"):
            raise DiscoveryError(f"profile {profile.name!r}: {path!r} is {_TYPE_NAMES.get(typ, typ)}, "
                                 f"not a device node: check the driver or the profile's globs")
        infos.append(NodeInfo(path, typ, major, minor, mode, uid, gid))
    return infos


def listdir_sorted(path: str) -> List[str]:
    """The names in a directory (sysfs), sorted; empty when it cannot be listed."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
