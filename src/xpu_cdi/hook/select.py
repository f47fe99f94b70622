"""Which devices a container asked for: selection variables in its
``process.env`` (each kind's syntax, from the hook index ``generate`` wrote)
and ``cdi.k8s.io/*`` annotations naming qualified CDI devices.

The container's environment is only ever *parsed* here, as data; nothing
from it reaches the hook's own process environment.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Iterable, List, Sequence

from ..cdi.names import devices_from_annotations
from ..errors import SelectionError

INDEX_SUFFIX = ".xpu-cdi"
MAX_INDEX_BYTES = 1 << 20
MAX_RANGE = 4096
_INT = re.compile(r"^[0-9]{1,6}$")
_RANGE = re.compile(r"^([0-9]{1,6})-([0-9]{1,6})$")


def load_indexes(dirs: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """The hook indexes (``*.xpu-cdi``) in *dirs* by kind; later dirs win.

    Cheap (small files only): the hook calls it before deciding whether a
    container asked for anything at all.
    """
    out: Dict[str, Dict[str, Any]] = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not name.endswith(INDEX_SUFFIX):
                continue
            try:
                with open(os.path.join(d, name), "rb") as f:
                    data = json.loads(f.read(MAX_INDEX_BYTES))
            except (OSError, ValueError):
                continue  # a broken index only disables env selection for its kind
            if isinstance(data, dict) and data.get("xpuCdiIndex") == 1 and isinstance(data.get("kind"), str):
                out[data["kind"]] = data
    return out


def env_map(env: Iterable[Any]) -> Dict[str, str]:
    """``["K=V", ...]`` -> ``{K: V}``; later entries win, as in execve's consumers."""
    out: Dict[str, str] = {}
    for entry in env:
        if isinstance(entry, str) and "=" in entry:
            key, _, value = entry.partition("=")
            out[key] = value
    return out


def parse_value(var: str, value: str, index: Dict[str, Any]) -> List[str]:
    """Device names selected by ``var=value`` under one kind's syntax.

    Accepts a comma list of indices, ranges (``0-3``), aliases the profile
    defines (``Ascend910-0``, ``npu-3``) and ``all``; a "none" value (``void``,
    empty) selects nothing.  Result is sorted by index and de-duplicated.

    Raises:
        SelectionError: a token is not understood or names an unknown card.
    """
    sel = index.get("selection") or {}
    none_values = sel.get("none") or ["", "void", "none"]
    stripped = value.strip()
    if stripped in none_values:
        return []
    indices: Dict[str, str] = index.get("indices") or {}
    alias = re.compile(sel["aliases"]) if sel.get("aliases") else None
    chosen: List[int] = []
    want_all = False
    for raw in stripped.split(","):
        token = raw.strip()
        m = None
        if token == "all":
            want_all = True
            continue
        if _INT.match(token):
            chosen.append(int(token))
            continue
        m = _RANGE.match(token)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi or hi - lo >= MAX_RANGE:
                raise SelectionError(f"{var}={value!r}: range {token!r} must be low-high with at most "
                                     f"{MAX_RANGE} cards")
            chosen.extend(range(lo, hi + 1))
            continue
        m = alias.match(token) if alias else None
        if m:
            chosen.append(int(m.group(1)))
            continue
        raise SelectionError(f"{var}={value!r}: {token!r} is not a card index, a range like 0-3"
                             f"{', a name like ' + _alias_example(sel) if alias else ''} or 'all'")
    if want_all:
        if not index.get("all"):
            return [indices[k] for k in sorted(indices, key=int)]
        return [index["all"]]
    out: List[str] = []
    for i in sorted(set(chosen)):
        name = indices.get(str(i))
        if name is None:
            known = ",".join(sorted(indices, key=int)) or "none"
            raise SelectionError(f"{var}={value!r}: no card {i} in the {index.get('kind')} spec "
                                 f"(cards: {known}); regenerate with `xpu-cdi generate` if cards changed")
        out.append(name)
    return out


def _alias_example(sel: Dict[str, Any]) -> str:
    return "Ascend910-0" if "Ascend" in str(sel.get("aliases")) else "the profile's aliases"


def requested(env: Iterable[Any], annotations: Dict[str, Any], indexes: Dict[str, Dict[str, Any]]) -> List[str]:
    """Qualified CDI devices a container asked for, in a stable order.

    Args:
        env: the container's ``process.env`` list (data; never executed).
        annotations: the container's OCI annotations.
        indexes: hook indexes by kind (:func:`load_indexes`).

    Raises:
        SelectionError: a malformed selection value or annotation.
    """
    out: List[str] = []
    values = env_map(env)
    for kind in sorted(indexes):
        index = indexes[kind]
        for var in (index.get("selection") or {}).get("env") or []:
            if var in values:
                for name in parse_value(var, values[var], index):
                    q = f"{kind}={name}"
                    if q not in out:
                        out.append(q)
                break  # the first variable of a kind that is set decides
    for q in devices_from_annotations({str(k): v for k, v in (annotations or {}).items()}):
        if q not in out:
            out.append(q)
    return out
