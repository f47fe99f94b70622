"""The ``config.json`` of an OCI bundle, for the wrapper's hot path: read it
(size-limited), tell cheaply whether it can ask for devices at all, and
parse it (``atomic.write_atomic`` replaces it).  Standard library,
``errors`` and ``hook.jsonload`` only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds of start-up: only for type checkers
if TYPE_CHECKING:
    from typing import Any, Dict, Sequence, Set, Tuple

MAX_CONFIG_BYTES = 64 << 20


def read_bytes(path: str) -> Tuple[bytes, int]:
    """The file's bytes and permission bits.

    Raises:
        RuntimeConfigError: unreadable or over MAX_CONFIG_BYTES.
    """
    from ..errors import RuntimeConfigError

    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode & 0o7777
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise RuntimeConfigError(f"cannot read {path!r}: {err.strerror}: is --bundle right?") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise RuntimeConfigError(f"{path!r} is larger than {MAX_CONFIG_BYTES} bytes")
    return data, mode


_NAME_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"


def selection_names(dirs: Sequence[str]) -> Set[bytes]:
    """Every upper-case identifier in the hook indexes' text (their
    selection variables and the profiles' known ones): a superset of the
    variables that can select cards, found without parsing JSON (json
    imports re: milliseconds)."""
    names: Set[bytes] = set()
    for d in dirs:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".xpu-cdi"):
                try:
                    with open(os.path.join(d, entry), "rb") as f:
                        raw = f.read(1 << 20)
                except OSError:
                    continue
                names.update(t for t in raw.split(b'"') if t and not t.translate(None, _NAME_CHARS))
    return names


def may_request(data: bytes, dirs: Sequence[str]) -> bool:
    """Whether ``config.json`` (raw bytes) can ask for devices at all.

    False only when it holds no ``cdi.k8s.io`` text and no ``"NAME=`` env
    entry for any selection variable named in the indexes in *dirs*.
    Runtime engines write config.json with Go's encoder, which never escapes
    letters, digits, ``_``, ``=`` or ``/``, so a real request always shows up
    literally.
    """
    if b"cdi.k8s.io" in data:
        return True
    return any(b'"' + name + b"=" in data for name in selection_names(dirs))


def parse_config(data: bytes, path: str) -> Dict[str, Any]:
    """The parsed config (a JSON object).

    Raises:
        RuntimeConfigError: not JSON, nested too deep, or not an object.
    """
    from ..errors import RuntimeConfigError
    from ..hook.jsonload import loads  # json.loads without importing json (re, enum...)

    try:
        config = loads(data)
    except (ValueError, RecursionError) as err:
        raise RuntimeConfigError(f"{path!r} is not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise RuntimeConfigError(f"{path!r}: expected a JSON object")
    return config
