"""``generate --check``: is the spec on disk what would be generated now?

Used by monitoring, by ``xpu-cdi doctor`` and by the refresh units: after
a driver update or a card change, a stale spec points at nodes that moved.
:func:`infer_options` reads back the options a spec was generated with, so
that doctor and the device plugin compare a spec with what the same
options give now.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional

from ..errors import SpecError
from ..model import PCI_ADDRESS, HostView
from . import edits as _edits
from . import spec as _spec


def read(path: str) -> Optional[Dict[str, Any]]:
    """The spec at *path*, or ``None`` when there is no file.

    Raises:
        SpecError: the file exists but cannot be read or parsed.
    """
    from .. import bounded
    from ..cdi.registry import MAX_SPEC_BYTES

    try:
        data = bounded.read(path, MAX_SPEC_BYTES)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SpecError(f"spec {path!r}: cannot read: {err.strerror}") from err
    except bounded.InputError as err:
        raise SpecError(f"spec {path!r}: {err}") from err
    try:
        if path.endswith(".yaml"):
            from ..cdi import yamlload

            spec = yamlload.load(data)
        else:
            spec = bounded.json_loads(data)
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


def infer_options(spec: Dict[str, Any], view: HostView) -> _spec.SpecOptions:
    """The ``generate`` options that would have produced *spec*: naming strategy, ``all`` device, hook
    path and timeout, env form, kind override (annotations left empty: ``withtopology.like_spec`` adds them)."""
    names = [str(d.get("name")) for d in spec.get("devices") or [] if isinstance(d, dict)]
    strategies: List[str] = []
    for name in names:
        strategy = "pci" if PCI_ADDRESS.match(name) else "index" if name.isdigit() else ""
        if strategy and strategy not in strategies:
            strategies.append(strategy)
    edits = spec.get("containerEdits") or {}
    ours_hook = [h for h in edits.get("hooks") or [] if isinstance(h, dict)
                 and (h.get("args") or [""])[0] == "xpu-cdi-hook"]
    hook = str(ours_hook[0]["path"]) if ours_hook else \
        os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "xpu-cdi-hook")
    timeout = int(ours_hook[0].get("timeout", 10)) if ours_hook else 10
    env = edits.get("env") or []
    vendor, _sep, cls = str(spec.get("kind", "")).partition("/")
    return _spec.SpecOptions(
        edit=_edits.EditOptions(hook_path=hook, hook_timeout=timeout,
                                ld_library_path_env=any(str(e).startswith("LD_LIBRARY_PATH=") for e in env)),
        name_strategies=tuple(strategies) or ("index",), all_device="all" in names,
        vendor=vendor if vendor != view.profile.vendor else None,
        device_class=cls if cls != view.profile.device_class else None)
