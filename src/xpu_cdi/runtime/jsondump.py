"""``json.dumps(obj, separators=(",", ":"))`` for the wrapper's hot path,
without importing :mod:`json` (which imports ``re``, ``enum`` and more:
milliseconds on every container start).

Strings go through the C escaper of the builtin ``_json`` module, the one
``json`` itself uses, so the output is byte for byte what ``json.dumps``
with ``ensure_ascii`` gives; ``hook.jsonload`` is the reading half.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List

try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has it
    _quote = None


def _walk(obj: Any, out: List[str]) -> None:
    if isinstance(obj, str):
        out.append(_quote(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise ValueError(f"{obj!r} is not valid JSON")
        out.append(float.__repr__(obj))
    elif isinstance(obj, dict):
        out.append("{")
        for i, (key, value) in enumerate(obj.items()):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
            out.append("," if i else "")
            out.append(_quote(key))
            out.append(":")
            _walk(value, out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            _walk(value, out)
        out.append("]")
    else:
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """Compact JSON text of *obj* (dicts, lists, str, int, float, bool, None).

    Raises:
        TypeError: an unsupported type; ValueError: NaN or infinity;
        RecursionError: nesting deeper than the interpreter allows.
    """
    if _quote is None:  # pragma: no cover
        import json

        return json.dumps(obj, separators=(",", ":"))
    out: List[str] = []
    _walk(obj, out)
    return "".join(out)
