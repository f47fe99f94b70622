"""old-driver: containers still holding driver files the host has since replaced.

A driver upgrade replaces the files a spec mounts (lib64, version.info ...).  A container
started before it keeps its bind mounts of the old ones: the kernel shows such a mount's source
as deleted (``//deleted`` after its root in ``/proc/<pid>/mountinfo``).  Each container is
named by the pod UID in its cgroup path (kubelet's ``pod<uid>``), else by its process.
docs/fleet.md (the driver-upgrade drill) says what such a pod still has.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Set, Tuple

from ..generate.discover import host_path
from .context import Context
from .result import Result, ok, warn

DELETED = "//deleted"
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (space, tab, newline, backslash) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:  # the process ended, or is not ours to read
        return ""


def _holder(proc: str, pid: str) -> str:
    """``pod <uid>`` from the process's cgroup path, else ``process <pid>``."""
    m = _POD.search(_read(os.path.join(proc, pid, "cgroup")))
    return f"pod {m.group(1).replace('_', '-')}" if m else f"process {pid}"


def running_pods(proc: str) -> Set[str]:
    """The UIDs of the pods that have a process now (kubelet's ``pod<uid>`` in its cgroup path)."""
    found = (_POD.search(_read(os.path.join(proc, pid, "cgroup"))) for pid in os.listdir(proc) if pid.isdigit())
    return {m.group(1).replace("_", "-") for m in found if m}


def deleted_mounts(proc: str, targets: Set[str]) -> Dict[str, Set[str]]:
    """Holder -> the mount points among *targets* whose source is deleted, one mount namespace
    read once (its first process found)."""
    out: Dict[str, Set[str]] = {}
    seen: Set[str] = set()
    for pid in sorted((p for p in os.listdir(proc) if p.isdigit()), key=int):
        try:
            ns = os.readlink(os.path.join(proc, pid, "ns", "mnt"))
        except OSError:
            continue
        if ns in seen:
            continue
        seen.add(ns)
        for line in _read(os.path.join(proc, pid, "mountinfo")).splitlines():
            fields = line.split(" ")
            if len(fields) < 5:
                continue
            root, point = _unescape(fields[3]), _unescape(fields[4])
            if root.endswith(DELETED) and point in targets:
                out.setdefault(_holder(proc, pid), set()).add(point)
    return out


def _targets(ctx: Context) -> Tuple[Set[str], List[str]]:
    """The container paths the profiles present mount, and the profiles' names."""
    paths: Set[str] = set()
    for st in ctx.states:
        paths.update(r.container_path or r.path for r in st.profile.mounts)
        paths.update(st.profile.library_dirs)
    return paths, [st.profile.name for st in ctx.states]


def check_old_driver(ctx: Context) -> List[Result]:
    """old-driver: no container holds driver files deleted on the host (nothing to say without
    a /proc to read, as under a fake host's root)."""
    proc = host_path(ctx.opts.proc_root, "/proc")
    targets, names = _targets(ctx)
    if not targets or not os.path.isdir(os.path.join(proc, "self")):
        return []
    held = deleted_mounts(proc, targets)
    if not held:
        return [ok("old-driver", f"{', '.join(names)}: no container holds driver files replaced on the host")]
    return [warn("old-driver", f"{who} still has the old driver mounted (deleted on the host since it started): "
                               f"{', '.join(sorted(points))}",
                 "restart it (delete the pod; its controller makes a new one) so it gets the new driver's files")
            for who, points in sorted(held.items())]
