"""Docker's ``daemon.json``: read it (``doctor`` uses the readers) and add
the ``xpu`` runtime and CDI.

Docker 25 to 28.1 need ``"features": {"cdi": true}`` for ``--device
vendor/class=name``; 28.2+ have CDI on by default (the setting is harmless).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ..cdi import registry
from ..errors import RuntimeConfigError
from .tomlconf import read_text

DEFAULT_CONFIG = "/etc/docker/daemon.json"
DEFAULT_SPEC_DIRS = list(registry.DEFAULT_DIRS)  # the runtime's default: CDI's own
CDI_ON_BY_DEFAULT = (28, 2, 0)  # the first release with CDI on without features.cdi


def parse(text: str, path: str) -> Dict[str, Any]:
    """Parse ``daemon.json`` text (an empty file is an empty config).

    Raises:
        RuntimeConfigError: not a JSON object.
    """
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise RuntimeConfigError(f"cannot parse {path!r}: {err}; fix the file (nothing was changed) "
                                 f"or pass another --config", path, str(err)) from None
    if not isinstance(doc, dict):
        raise RuntimeConfigError(f"cannot parse {path!r}: expected a JSON object at the top", path,
                                 "expected a JSON object at the top")
    return doc


def load(path: str) -> Dict[str, Any]:
    """``daemon.json`` as a dict (key order kept); ``{}`` when it does not exist.

    Raises:
        RuntimeConfigError: unreadable or not a JSON object.
    """
    text = read_text(path)
    return parse(text, path) if text is not None else {}


def cdi_enabled(doc: Dict[str, Any], release: Optional[Tuple[int, ...]] = None) -> bool:
    """Whether CDI is on: ``features.cdi``; when it is unset, whether
    *release* (the installed Docker's, when known) is 28.2 or later."""
    features = doc.get("features")
    value = features.get("cdi") if isinstance(features, dict) else None
    if value is None:
        return release is not None and release >= CDI_ON_BY_DEFAULT
    return value is True


def cdi_spec_dirs(doc: Dict[str, Any]) -> List[str]:
    """The CDI spec dirs Docker reads (``cdi-spec-dirs``; its default when unset)."""
    return list(doc.get("cdi-spec-dirs") or DEFAULT_SPEC_DIRS)


def handlers(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The ``runtimes`` map (name -> ``{"path": ..., "runtimeArgs": [...]}``)."""
    runtimes = doc.get("runtimes")
    return {k: v for k, v in runtimes.items() if isinstance(v, dict)} if isinstance(runtimes, dict) else {}


def binaries(doc: Dict[str, Any]) -> Dict[str, str]:
    """Runtime name -> the binary it runs (``path``; ``""``: runc on PATH),
    with Docker's built-in ``runc``."""
    out = {"runc": ""}
    out.update({name: str(h.get("path") or "") for name, h in handlers(doc).items()})
    return out


def default_runtime(doc: Dict[str, Any]) -> str:
    """``default-runtime`` (Docker's default is ``runc``)."""
    return str(doc.get("default-runtime") or "runc")


def configure(doc: Dict[str, Any], name: str, wrapper: str, enable_cdi: bool, set_as_default: bool,
              spec_dirs: List[str]) -> List[str]:
    """Add the runtime (and CDI) to *doc* in place; other keys stay as they are.

    Returns:
        Notes for the user.

    Raises:
        RuntimeConfigError: ``runtimes`` or ``features`` is not an object.
    """
    for key in ("runtimes", "features"):
        if key in doc and not isinstance(doc[key], dict):
            raise RuntimeConfigError(f"daemon.json {key!r} is a {type(doc[key]).__name__}, not an object: "
                                     f"fix the file")
    runtimes = doc.setdefault("runtimes", {})
    entry = runtimes.get(name) if isinstance(runtimes.get(name), dict) else {}
    runtimes[name] = dict(entry, path=wrapper)
    if enable_cdi:
        doc.setdefault("features", {})["cdi"] = True
        if list(spec_dirs) != DEFAULT_SPEC_DIRS:
            doc["cdi-spec-dirs"] = list(spec_dirs)
    if set_as_default:
        doc["default-runtime"] = name
    return []


def indent_of(text: str) -> Any:
    """The indentation the file uses (spaces count or a tab), 4 by default."""
    m = re.search(r"^([ \t]+)\"", text or "", re.M)
    if not m:
        return 4
    return "\t" if m.group(1).startswith("\t") else len(m.group(1))


def dumps(doc: Dict[str, Any], like: str) -> str:
    """Serialise *doc* indented like the text *like*."""
    return json.dumps(doc, indent=indent_of(like)) + "\n"
