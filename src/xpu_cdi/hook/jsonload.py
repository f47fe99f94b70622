"""``json.loads`` for the hook's hot path, without importing :mod:`json`.

Importing the ``json`` package also imports ``re``, ``enum``, ``functools``
and ``collections`` (about 8 ms of the hook's start on the reference
machine, as much as the interpreter itself).  The C scanner behind
``json.loads`` lives in the builtin ``_json`` module and only needs a small
context object, so we drive it directly and get the same results.  When
``_json`` is missing (another Python implementation) we use ``json``.
Errors are ``ValueError`` either way (``json.JSONDecodeError`` is one).
"""

from __future__ import annotations

_WS = " \t\n\r"

try:
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - CPython always has it
    _make_scanner = None


class _Context:
    """The attributes json.decoder.JSONDecoder gives the C scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = _make_scanner(_Context()) if _make_scanner is not None else None


def loads(data: "bytes | str") -> object:
    """Parse one JSON document (UTF-8 bytes or str), exactly as ``json.loads``.

    Raises:
        ValueError: not valid JSON, or extra data after the document.
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"not UTF-8: {err}") from None
    else:
        text = data
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    idx = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _scan(text, idx)
        if not text[end:].strip(_WS):
            return obj
    except (StopIteration, ValueError, SystemError):
        # Invalid input: the C scanner builds its error from json.decoder,
        # which it only finds if already imported (3.11 gives SystemError
        # otherwise).  Let json itself say what is wrong, in its own words.
        pass
    import json

    return json.loads(text)
