"""Which devices a container asked for: selection variables in its
``process.env`` (each kind's syntax, from the hook index ``generate`` wrote)
and ``cdi.k8s.io/*`` annotations naming qualified CDI devices.

The container's environment is only ever *parsed* here, as data; nothing
from it reaches the hook's own process environment.
"""

from __future__ import annotations

import os

from ..errors import SelectionError
from .jsonload import loads

# This runs on every container start, before the hook knows whether the
# container wants a device at all.  json, re, typing and cdi.names (re)
# would cost more than the interpreter's own start-up on the reference
# machine, so: JSON through hook.jsonload, indices, ranges and the
# profile's alias prefixes parsed by hand, cdi.names imported only for
# containers with cdi.k8s.io/ keys.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

INDEX_SUFFIX = ".xpu-cdi"
MAX_INDEX_BYTES = 1 << 20
MAX_RANGE = 4096
MAX_TOKEN = 64
MAX_VALUE = 1 << 16
ANNOTATION_PREFIX = "cdi.k8s.io/"  # as cdi.names.ANNOTATION_PREFIX (a test keeps them equal)


def _int(token: str) -> "Optional[int]":
    """*token* as a card index when it is 1 to 6 ASCII digits (``^[0-9]{1,6}\\Z``)."""
    if 0 < len(token) <= 6 and token.isascii() and token.isdigit():
        return int(token)
    return None


def _range(token: str) -> "Optional[Tuple[int, int]]":
    """``lo-hi`` of two such indices (``^([0-9]{1,6})-([0-9]{1,6})\\Z``), or None."""
    lo, dash, hi = token.partition("-")
    a, b = _int(lo), _int(hi)
    return (a, b) if dash and a is not None and b is not None else None


def _uuid_like(token: str) -> bool:
    """A chip UUID as vendor device plugins send them: 8-4-4-4-12 hex digits,
    after an optional ``<letters>-`` prefix (``GPU-...``)."""
    tail = token.rsplit("-", 5)
    if len(tail) == 6 and tail[0].isascii() and tail[0].isalpha():
        tail = tail[1:]
    return [len(p) for p in tail] == [8, 4, 4, 4, 12] and all(
        c in "0123456789abcdefABCDEF" for p in tail for c in p)


def load_indexes(dirs: "Sequence[str]") -> "Dict[str, Dict[str, Any]]":
    """The hook indexes (``*.xpu-cdi``) in *dirs* by kind; later dirs win.

    Cheap (small files only): the hook calls it before deciding whether a
    container asked for anything at all.
    """
    out: "Dict[str, Dict[str, Any]]" = {}
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
                    data = loads(f.read(MAX_INDEX_BYTES))
            except (OSError, ValueError, RecursionError):
                continue  # a broken index only disables env selection for its kind
            if _usable(data):
                out[data["kind"]] = data
    return out


def _usable(data: "Any") -> bool:
    """Whether *data* has the shape ``generate`` writes, so that parsing a
    selection value under it can only fail with a :class:`SelectionError`.
    (An index written before aliases were prefixes has a regex string there:
    usable, its alias tokens refused with a hint to regenerate.)"""
    if not isinstance(data, dict) or data.get("xpuCdiIndex") != 1 or not isinstance(data.get("kind"), str):
        return False
    sel, indices, all_name = data.get("selection"), data.get("indices"), data.get("all")
    if not isinstance(sel, dict) or not isinstance(indices, dict) or not (all_name is None or isinstance(all_name, str)):
        return False
    if not all(isinstance(k, str) and _int(k) is not None and isinstance(v, str) for k, v in indices.items()):
        return False
    for key in ("env", "none", "all"):
        if not isinstance(sel.get(key, []), list) or not all(isinstance(v, str) for v in sel.get(key) or []):
            return False
    aliases = sel.get("aliases")
    if not (aliases is None or isinstance(aliases, str) or
            (isinstance(aliases, list) and all(isinstance(v, str) and v for v in aliases))):
        return False
    return isinstance(sel.get("ignoreCase", False), bool) and (sel.get("uuidsFrom") is None or
                                                              isinstance(sel.get("uuidsFrom"), str))


def env_map(env: "Iterable[Any]") -> "Dict[str, str]":
    """``["K=V", ...]`` -> ``{K: V}``; later entries win, as in execve's consumers."""
    out: "Dict[str, str]" = {}
    for entry in env:
        if isinstance(entry, str) and "=" in entry:
            key, _, value = entry.partition("=")
            out[key] = value
    return out


def parse_value(var: str, value: str, index: "Dict[str, Any]") -> "List[str]":
    """Device names selected by ``var=value`` under one kind's syntax.

    Accepts a comma list of indices, ranges (``0-3``), aliases the profile
    defines (``Ascend910-0``, ``npu-3``) and ``all``; a "none" value (``void``,
    empty) selects nothing.  Result is sorted by index and de-duplicated.
    The value comes from the container: work is bounded by the value's
    length and the number of cards, never by the numbers written in it.

    Raises:
        SelectionError: a token is not understood or names an unknown card.
    """
    shown = _shown(var, value)
    if len(value) > MAX_VALUE:
        raise SelectionError(f"{shown}: longer than {MAX_VALUE} characters")
    sel = index.get("selection") or {}
    fold = (lambda t: t.lower()) if sel.get("ignoreCase") is True else (lambda t: t)
    none_values = [fold(v) for v in sel.get("none") or ["", "void", "none"]]
    all_words = [fold(v) for v in sel.get("all") or ["all"]]
    prefixes = [fold(p) for p in sel.get("aliases") or [] if isinstance(sel.get("aliases"), list)]
    stripped = value.strip()
    if fold(stripped) in none_values:
        return []
    indices: "Dict[str, str]" = index.get("indices") or {}
    spans: "List[Tuple[int, int]]" = []
    want_all = False
    for raw in stripped.split(","):
        token = raw.strip()
        if fold(token) in all_words:
            want_all = True
            continue
        n = _int(token)
        if n is not None:
            spans.append((n, n))
            continue
        span = _range(token)
        if span is not None:
            lo, hi = span
            if lo > hi or hi - lo >= MAX_RANGE:
                raise SelectionError(f"{shown}: range {token!r} must be low-high with at most "
                                     f"{MAX_RANGE} cards")
            spans.append((lo, hi))
            continue
        if len(token) > MAX_TOKEN:
            raise SelectionError(f"{shown}: a token of {len(token)} characters is not a card index or name")
        n = next((_int(token[len(p):]) for p in prefixes if fold(token).startswith(p) and
                  _int(token[len(p):]) is not None), None)
        if n is not None:
            spans.append((n, n))
            continue
        if sel.get("uuidsFrom") and _uuid_like(token):
            raise SelectionError(f"{shown}: {token!r} is a chip UUID, as {sel['uuidsFrom']} sends them: select "
                                 f"cards by index (0,1) or by CDI name (cdi_devices or a cdi.k8s.io/ annotation, "
                                 f"e.g. {index.get('kind')}=0)")
        if isinstance(sel.get("aliases"), str):
            raise SelectionError(f"{shown}: {token!r} is not a card index or a range like 0-3, and the hook index "
                                 f"of {index.get('kind')} predates alias prefixes: regenerate it with "
                                 f"`xpu-cdi generate`")
        example = f", a name like {sel['aliases'][0]}0" if prefixes else ""
        raise SelectionError(f"{shown}: {token!r} is not a card index, a range like 0-3{example} or "
                             f"{' / '.join(repr(w) for w in (sel.get('all') or ['all']))}")
    if want_all:
        if not index.get("all"):
            return [indices[k] for k in sorted(indices, key=int)]
        return [index["all"]]
    out: "List[str]" = []
    done = -1  # highest index already emitted: overlapping spans are walked once
    for lo, hi in sorted(spans):
        for i in range(max(lo, done + 1), hi + 1):
            name = indices.get(str(i))
            if name is None:
                known = ",".join(sorted(indices, key=int)) or "none"
                raise SelectionError(f"{shown}: no card {i} in the {index.get('kind')} spec "
                                     f"(cards: {known}); regenerate with `xpu-cdi generate` if cards changed")
            out.append(name)
        done = max(done, hi)
    return out


def _shown(var: str, value: str) -> str:
    """``VAR='value'`` for messages, shortened: the value is the container's and may be huge."""
    if len(value) <= 100:
        return f"{var}={value!r}"
    return f"{var}={value[:60]!r}... ({len(value)} characters)"


def requested(env: "Iterable[Any]", annotations: "Dict[str, Any]",
              indexes: "Dict[str, Dict[str, Any]]") -> "List[str]":
    """Qualified CDI devices a container asked for, in a stable order.

    Args:
        env: the container's ``process.env`` list (data; never executed).
        annotations: the container's OCI annotations.
        indexes: hook indexes by kind (:func:`load_indexes`).

    Raises:
        SelectionError: a malformed selection value or annotation.
    """
    out: "Dict[str, None]" = {}  # an ordered set: annotations may name many devices
    values = env_map(env)
    for kind in sorted(indexes):
        index = indexes[kind]
        for var in (index.get("selection") or {}).get("env") or []:
            if var in values:
                for name in parse_value(var, values[var], index):
                    out[f"{kind}={name}"] = None
                break  # the first variable of a kind that is set decides
    if any(str(k).startswith(ANNOTATION_PREFIX) for k in annotations or {}):
        from ..cdi.names import devices_from_annotations  # only keys with the prefix matter to it

        for q in devices_from_annotations({str(k): v for k, v in (annotations or {}).items()}):
            out[q] = None
    return list(out)
