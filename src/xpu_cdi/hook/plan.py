"""The hook's plan: the merged CDI edits checked and completed on the
host side (device numbers from ``hostPath`` when the spec omits them, bind
mount flags, the spec's own hooks the hook runs in-process) before
anything in the container is touched."""

from __future__ import annotations

import os
import stat

from .. import resolver
from ..errors import HookError
from . import links

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                "rw": 0, "bind": 0, "rbind": 0}
# propagation and atime options change nothing for a bind inside a private tree
_IGNORED = {"private", "rprivate", "slave", "rslave", "shared", "rshared", "unbindable", "runbindable",
            "relatime", "norelatime", "strictatime", "noatime", "atime", "suid", "dev", "exec"}
S_TYPES = {"c": stat.S_IFCHR, "u": stat.S_IFCHR, "b": stat.S_IFBLK, "p": stat.S_IFIFO}
TOOLS = ("update-ldcache", "create-symlinks")


class Plan:
    """What to do in the container, worked out before touching it."""

    def __init__(self) -> None:
        self.nodes: "List[Dict[str, Any]]" = []
        self.mounts: "List[Tuple[str, str, int, bool]]" = []  # host, container, flags, recursive
        self.folders: "List[str]" = []
        self.links: "List[Tuple[str, str]]" = []
        self.notes: "List[str]" = []


def plan(edits: "Dict[str, List[Any]]") -> Plan:
    """Check and complete the merged edits (host side, nothing changed).

    Raises:
        HookError: a node or mount the hook cannot honour.
    """
    p = Plan()
    missing = [n.get("hostPath") or n.get("path") for n in edits["deviceNodes"]
               if n.get("type") != "p" and (n.get("major") is None or n.get("minor") is None)]
    found = dict(zip(missing, resolver.stat_nodes(missing))) if missing else {}
    for node in edits["deviceNodes"]:
        path = node.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise HookError(f"device node path {path!r} must be absolute")
        n = dict(node)
        n.setdefault("hostPath", path)
        kind = n.get("type") or None
        if n.get("major") is None or n.get("minor") is None:
            row = found.get(n["hostPath"])
            if row is None or row[0] != 0:
                why = os.strerror(row[0]) if row else "not found"
                raise HookError(f"device node {path!r}: host node {n['hostPath']!r}: {why}")
            if kind is None and row[1] in "cb":
                kind = row[1]
            n["major"], n["minor"] = row[2], row[3]
            n.setdefault("fileMode", row[4])
        n["type"] = kind or "c"
        if n["type"] not in S_TYPES:
            raise HookError(f"device node {path!r}: type {n['type']!r} must be c, b, u or p")
        p.nodes.append(n)
    for m in edits["mounts"]:
        p.mounts.append(_plan_mount(m))
    for h in edits["hooks"]:
        _plan_hook(h, p)
    if edits.get("env"):
        p.notes.append(f"{len(edits['env'])} env edit(s) not applied: a hook cannot change the container's "
                       f"environment (use CDI mode or the xpu-container-runtime wrapper)")
    return p


def _plan_mount(m: "Dict[str, Any]") -> "Tuple[str, str, int, bool]":
    host, target = m.get("hostPath"), m.get("containerPath")
    if not isinstance(host, str) or not host.startswith("/") or not isinstance(target, str):
        raise HookError(f"mount {host!r} -> {target!r}: hostPath and containerPath must be absolute paths")
    options = list(m.get("options") or [])
    if "bind" not in options and "rbind" not in options and m.get("type") not in ("bind", "rbind"):
        raise HookError(f"mount {host!r} -> {target!r}: only bind mounts can be made by the hook "
                        f"(options {options!r}); use CDI mode for other mount types")
    flags = 0
    for opt in options:
        if opt in _MOUNT_FLAGS:
            flags |= _MOUNT_FLAGS[opt]
        elif opt not in _IGNORED:
            raise HookError(f"mount {host!r} -> {target!r}: option {opt!r} is not supported by the hook")
    return host, target, flags, "rbind" in options or m.get("type") == "rbind"


def _plan_hook(h: "Dict[str, Any]", p: Plan) -> None:
    args = h.get("args") or []
    sub = args[1] if len(args) > 1 else ""
    ours = os.path.basename(str(h.get("path", ""))).startswith("xpu-cdi") or \
        os.path.basename(str(args[0] if args else "")).startswith("xpu-cdi")
    if not ours or sub not in TOOLS:
        p.notes.append(f"spec hook {h.get('path')!r} {' '.join(args[1:2])} not run: only xpu-cdi-hook's "
                       f"{' and '.join(TOOLS)} are run in-process on the prestart path")
        return
    from .main import parse_tool_args  # the same parsing as `xpu-cdi-hook update-ldcache ...`

    opts = parse_tool_args(sub, list(args[2:]))
    if sub == "update-ldcache":
        p.folders.extend(f for f in opts["folder"] if f not in p.folders)
    else:
        p.links.extend(links.parse(opts["link"]))
