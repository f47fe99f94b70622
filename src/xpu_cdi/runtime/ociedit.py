"""Apply CDI container edits to an OCI runtime spec (``config.json``) the
way CDI-aware runtimes do, so that plain runc does the injection itself.

Differences from the reference library, each on purpose:

* ``LD_LIBRARY_PATH`` is merged, not replaced: the image's own entries stay
  first and the spec's library directories are appended (also those of an
  ``update-ldcache`` hook, so that images without ``ldconfig`` find the
  driver libraries too).  A CDI env entry would throw the image's value away.
* Every edit is idempotent: a ``create`` retried on an already edited
  ``config.json`` changes nothing (devices and mounts are replaced by path,
  rules, hooks and gids are added only when missing).

Hot path of ``xpu-container-runtime``: standard library only.
"""

from __future__ import annotations

import os
import stat

from ..errors import RuntimeConfigError, SpecError

TYPE_CHECKING = False  # typing is for type checkers only: it costs start-up time
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

HOOK_STAGES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
LD_VAR = "LD_LIBRARY_PATH"
_TYPES = {stat.S_IFCHR: "c", stat.S_IFBLK: "b", stat.S_IFIFO: "p"}


def _dict(parent: Dict[str, Any], key: str) -> Dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _list(parent: Dict[str, Any], key: str) -> List[Any]:
    value = parent.get(key)
    if not isinstance(value, list):
        value = parent[key] = []
    return value


def oci_device(node: Dict[str, Any]) -> Dict[str, Any]:
    """The OCI ``linux.devices`` entry of a CDI ``deviceNodes`` entry.

    Type, numbers and mode missing from the spec are read from the host
    node (``hostPath``, else ``path``), as the reference library does.

    Raises:
        SpecError: a number is missing and the host node cannot be read.
    """
    path = node.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError(f"device node {path!r}: 'path' must be an absolute container path")
    typ, major, minor, mode = node.get("type"), node.get("major"), node.get("minor"), node.get("fileMode")
    if typ is None or mode is None or (typ != "p" and (major is None or minor is None)):
        host = node.get("hostPath") or path
        try:
            st = os.stat(host)
        except OSError as err:
            raise SpecError(f"device node {path!r}: cannot read host node {host!r}: {err.strerror}; "
                            f"regenerate the spec with `xpu-cdi generate`") from None
        kind = _TYPES.get(stat.S_IFMT(st.st_mode))
        if kind is None:
            raise SpecError(f"device node {path!r}: host path {host!r} is not a device node")
        typ = typ or kind
        if major is None or minor is None:
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        if mode is None:
            mode = stat.S_IMODE(st.st_mode)
    dev: Dict[str, Any] = {"path": path, "type": typ}
    if typ != "p":
        dev["major"], dev["minor"] = major, minor
    # runc creates the node with uid/gid 0 when they are absent: say so explicitly
    dev.update(fileMode=mode, uid=node.get("uid", 0), gid=node.get("gid", 0))
    return dev


def cgroup_rule(dev: Dict[str, Any], permissions: Optional[str]) -> Optional[Dict[str, Any]]:
    """The ``linux.resources.devices`` allow rule a device node needs (None for a fifo)."""
    if dev["type"] == "p":
        return None
    return {"allow": True, "type": "b" if dev["type"] == "b" else "c", "major": dev["major"],
            "minor": dev["minor"], "access": permissions or "rwm"}


def _apply_nodes(config: Dict[str, Any], nodes: List[Dict[str, Any]]) -> None:
    linux = _dict(config, "linux")
    devices = _list(linux, "devices")
    rules = _list(_dict(linux, "resources"), "devices")
    for node in nodes:
        dev = oci_device(node)
        devices[:] = [d for d in devices if not (isinstance(d, dict) and d.get("path") == dev["path"])]
        devices.append(dev)
        rule = cgroup_rule(dev, node.get("permissions"))
        if rule is not None and rule not in rules:
            rules.append(rule)


def oci_mount(mount: Dict[str, Any]) -> Dict[str, Any]:
    """The OCI ``mounts`` entry of a CDI mount.

    Raises:
        SpecError: a path is missing or relative.
    """
    src, dst = mount.get("hostPath"), mount.get("containerPath")
    if not (isinstance(src, str) and isinstance(dst, str) and dst.startswith("/")):
        raise SpecError(f"mount {dst!r}: 'hostPath' and an absolute 'containerPath' are required")
    options = list(mount.get("options") or [])
    out: Dict[str, Any] = {"destination": dst, "source": src}
    mtype = mount.get("type") or ("bind" if "bind" in options or "rbind" in options else None)
    if mtype:
        out["type"] = mtype
    out["options"] = options
    return out


def _depth(mount: Any) -> int:
    dst = mount.get("destination") if isinstance(mount, dict) else None
    return len([p for p in os.path.normpath(dst).split("/") if p]) if isinstance(dst, str) else 0


def _apply_mounts(config: Dict[str, Any], mounts: List[Dict[str, Any]]) -> None:
    current = _list(config, "mounts")
    for c in current:
        if isinstance(c, dict) and not isinstance(c.get("destination", ""), str):
            raise RuntimeConfigError(f"config.json: mount destination {c['destination']!r} is not a string "
                                     f"(runc would refuse it too)")
    for m in mounts:
        new = oci_mount(m)
        current[:] = [c for c in current if not (isinstance(c, dict) and
                                                 os.path.normpath(c.get("destination", "")) ==
                                                 os.path.normpath(new["destination"]))]
        current.append(new)
    # parents before children, stable otherwise: what CDI runtimes do after injecting
    current.sort(key=_depth)


def library_dirs(edits: Dict[str, List[Any]]) -> List[str]:
    """Library dirs the edits want on the loader path: ``LD_LIBRARY_PATH``
    env entries and the ``--folder`` arguments of ``update-ldcache`` hooks."""
    dirs: List[str] = []
    for entry in edits.get("env") or []:
        if isinstance(entry, str) and entry.startswith(LD_VAR + "="):
            dirs.extend(d for d in entry[len(LD_VAR) + 1:].split(":") if d)
    for hook in edits.get("hooks") or []:
        args = (hook.get("args") or []) if isinstance(hook, dict) else []
        if "update-ldcache" not in args:
            continue
        for i, arg in enumerate(args):
            if arg == "--folder" and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif isinstance(arg, str) and arg.startswith("--folder="):
                dirs.append(arg[len("--folder="):])
    out: List[str] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def _set_env(env: List[str], key: str, value: str) -> None:
    prefix = key + "="
    for i, entry in enumerate(env):
        if isinstance(entry, str) and entry.startswith(prefix):
            env[i] = prefix + value
            return
    env.append(prefix + value)


def _get_env(env: List[str], key: str) -> Optional[str]:
    prefix = key + "="
    found = None
    for entry in env:
        if isinstance(entry, str) and entry.startswith(prefix):
            found = entry[len(prefix):]  # the last one wins, as in execve's consumers
    return found


def _apply_env(config: Dict[str, Any], edits: Dict[str, List[Any]]) -> None:
    env = _list(_dict(config, "process"), "env")
    for entry in edits.get("env") or []:
        key, sep, value = str(entry).partition("=")
        if not sep or not key:
            raise SpecError(f"env entry {entry!r}: expected KEY=VALUE")
        if key != LD_VAR:
            _set_env(env, key, value)
    dirs = library_dirs(edits)
    if dirs:
        have = [d for d in (_get_env(env, LD_VAR) or "").split(":") if d]
        merged = have + [d for d in dirs if d not in have]
        _set_env(env, LD_VAR, ":".join(merged))


def oci_hook(hook: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``(stage, OCI hook)`` of a CDI hook.

    Raises:
        SpecError: an unknown stage or a relative path.
    """
    stage, path = hook.get("hookName"), hook.get("path")
    if stage not in HOOK_STAGES:
        raise SpecError(f"hook {path!r}: unknown hookName {stage!r} (one of {', '.join(HOOK_STAGES)})")
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError(f"hook {path!r}: 'path' must be absolute")
    out: Dict[str, Any] = {"path": path}
    for key in ("args", "env", "timeout"):
        if hook.get(key) is not None:
            out[key] = hook[key]
    return stage, out


def _apply_hooks(config: Dict[str, Any], hooks: List[Dict[str, Any]]) -> None:
    for hook in hooks:
        stage, oci = oci_hook(hook)
        stage_hooks = _list(_dict(config, "hooks"), stage)
        if oci not in stage_hooks:
            stage_hooks.append(oci)


def apply(config: Dict[str, Any], edits: Dict[str, List[Any]]) -> None:
    """Apply merged CDI edits (``registry.merge_edits``) to *config* in place.

    Args:
        config: the parsed ``config.json``.
        edits: ``env``, ``deviceNodes``, ``mounts``, ``hooks`` and optionally
            ``additionalGids`` lists.

    Raises:
        SpecError: an edit is malformed or names a host node that is gone.
    """
    _apply_nodes(config, edits.get("deviceNodes") or [])
    _apply_mounts(config, edits.get("mounts") or [])
    _apply_env(config, edits)
    _apply_hooks(config, edits.get("hooks") or [])
    gids = edits.get("additionalGids") or []
    if gids:
        user = _dict(_dict(config, "process"), "user")
        have = _list(user, "additionalGids")
        have.extend(g for g in gids if g not in have)
