"""``generate --check``: is the spec on disk what would be generated now?

Used by monitoring, by ``xpu-cdi doctor`` and by the refresh units: after
a driver update or a card change, a stale spec points at nodes that moved.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ..errors import SpecError


def read(path: str) -> Optional[Dict[str, Any]]:
    """The spec at *path*, or ``None`` when there is no file.

    Raises:
        SpecError: the file exists but cannot be read or parsed.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SpecError(f"spec {path!r}: cannot read: {err.strerror}") from err
    try:
        if path.endswith(".yaml"):
            from ..cdi import yamlload

            spec = yamlload.load(data)
        else:
            spec = json.loads(data)
    except Exception as err:  # noqa: BLE001 - any parse error means "stale"
        raise SpecError(f"spec {path!r}: cannot parse: {' '.join(str(err).split())}") from err
    if not isinstance(spec, dict):
        raise SpecError(f"spec {path!r}: expected an object at the top")
    return spec


def _devices(spec: Dict[str, Any]) -> Dict[str, Any]:
    devices = spec.get("devices")  # a hand-edited file may hold anything here: that is "changed"
    return {str(d.get("name")): d for d in devices if isinstance(d, dict)} if isinstance(devices, list) else {}


def _names(names: List[str]) -> str:
    """Device names for one line of output: a hand-edited file may hold newlines in them."""
    return ", ".join(n if n.isprintable() else repr(n) for n in names)


def differences(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> List[str]:
    """Human-readable differences between the on-disk spec and a fresh one (empty: up to date)."""
    if old is None:
        return ["no spec on disk"]
    out: List[str] = []
    for key in ("cdiVersion", "kind"):
        if old.get(key) != new.get(key):
            out.append(f"{key} {old.get(key)!r} -> {new.get(key)!r}")  # repr: one line
    before, after = _devices(old), _devices(new)
    gone = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    if gone:
        out.append(f"devices no longer present: {_names(gone)}")
    if added:
        out.append(f"new devices: {_names(added)}")
    changed = sorted(n for n in set(before) & set(after) if before[n] != after[n])
    if changed:
        out.append(f"devices changed (nodes, numbers or annotations): {_names(changed)}")
    if old.get("containerEdits") != new.get("containerEdits"):
        out.append("shared edits changed (control nodes, mounts, env or hooks)")
    return out
