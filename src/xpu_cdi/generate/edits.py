"""Turn what discovery found into CDI ``containerEdits`` (plain dicts, keys
spelled exactly as the reference CDI library spells them)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Sequence

from ..model import Card, DeviceNode, HostView

# A bind mount is recognised by runtimes from its options; nosuid/nodev
# because driver files never need either, ro because containers must not
# change the host's driver.
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "bind"]
HOOK_ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]  # hooks inherit no environment


class EditOptions(NamedTuple):
    """Knobs of ``xpu-cdi generate`` that change the edits."""

    hook_path: str
    ld_library_path_env: bool = False  # LD_LIBRARY_PATH instead of the ldcache hook
    hook_timeout: int = 10


DEFAULT_MODE = 0o666  # what runtimes give a node whose spec entry has no fileMode


def device_node(node: DeviceNode) -> Dict[str, Any]:
    """The CDI ``deviceNodes`` entry of one node.

    Owner, group and mode come from the host node and are written only
    where they differ from root and 0666: a driver that makes its nodes
    0660 for its run user (Ascend's ``HwHiAiUser``) must see them so in the
    container too, or that user gets "permission denied" on its own card.
    """
    entry: Dict[str, Any] = {
        "path": node.container_path,
        "hostPath": node.host.path,
        "type": node.host.type,
        "major": node.host.major,
        "minor": node.host.minor,
    }
    if node.host.mode != DEFAULT_MODE:
        entry["fileMode"] = node.host.mode
    entry["permissions"] = "rwm"
    if node.host.uid:
        entry["uid"] = node.host.uid
    if node.host.gid:
        entry["gid"] = node.host.gid
    return entry


def card_edits(card: Card) -> Dict[str, Any]:
    """Edits of one card: its own device nodes."""
    return {"deviceNodes": [device_node(n) for n in card.nodes]}


def all_edits(cards: Sequence[Card]) -> Dict[str, Any]:
    """Edits of the ``all`` device: every card's nodes."""
    return {"deviceNodes": [device_node(n) for c in cards for n in c.nodes]}


def _hook(opts: EditOptions, args: List[str]) -> Dict[str, Any]:
    return {"hookName": "createContainer", "path": opts.hook_path,
            "args": ["xpu-cdi-hook", *args], "env": list(HOOK_ENV), "timeout": opts.hook_timeout}


def shared_edits(view: HostView, opts: EditOptions) -> Dict[str, Any]:
    """Spec-level edits: control nodes, driver mounts, env and hooks.

    The driver libraries reach the dynamic loader through a createContainer
    hook (an ld.so.conf.d entry plus ldconfig) by default, because a CDI env
    entry *replaces* the image's own ``LD_LIBRARY_PATH``.
    """
    edits: Dict[str, Any] = {}
    env = list(view.profile.env)
    if view.library_dirs and opts.ld_library_path_env:
        env.append("LD_LIBRARY_PATH=" + ":".join(view.library_dirs))
    if env:
        edits["env"] = env
    if view.shared_nodes:
        edits["deviceNodes"] = [device_node(n) for n in view.shared_nodes]
    if view.mounts:
        edits["mounts"] = [{"hostPath": m.host_path, "containerPath": m.container_path,
                            "options": list(MOUNT_OPTIONS)} for m in view.mounts]
    hooks = []
    if view.library_dirs and not opts.ld_library_path_env:
        args = ["update-ldcache"]
        for d in view.library_dirs:
            args += ["--folder", d]
        hooks.append(_hook(opts, args))
    if view.profile.symlinks:
        args = ["create-symlinks"]
        for s in view.profile.symlinks:
            args += ["--link", f"{s.target}::{s.link}"]
        hooks.append(_hook(opts, args))
    if hooks:
        edits["hooks"] = hooks
    return edits
