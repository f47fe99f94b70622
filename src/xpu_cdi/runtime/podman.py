"""podman's ``containers.conf``: read it (``doctor`` uses the readers) and
register the wrapper as OCI runtime ``xpu`` (``podman run --runtime xpu``).

podman has CDI built in (``--device vendor/class=name``); the runtime entry
adds env-based selection (``-e CXPU_VISIBLE_DEVICES=2``) with env vars set.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import tomlconf
from .tomlconf import get, load  # noqa: F401 - load is part of the reader API

DEFAULT_CONFIG = "/etc/containers/containers.conf"
DEFAULT_DROP_IN = "/etc/containers/containers.conf.d/99-xpu-cdi.conf"


def handlers(doc: Any) -> Dict[str, List[str]]:
    """``[engine.runtimes]``: runtime name -> candidate paths."""
    found = get(doc, ["engine", "runtimes"], {}) or {}
    return {k: [str(p) for p in v] for k, v in found.items() if isinstance(v, list)}


def default_runtime(doc: Any) -> Optional[str]:
    """``[engine] runtime`` if set (podman's default is crun or runc by distribution)."""
    value = get(doc, ["engine", "runtime"])
    return str(value) if value else None


def configure(doc: Any, name: str, wrapper: str, set_as_default: bool) -> List[str]:
    """Add ``[engine.runtimes] <name> = [wrapper]`` (and the default) to *doc* in place.

    Returns:
        Notes for the user.
    """
    engine = tomlconf.ensure_table(doc, ["engine"], explicit=set_as_default)
    if set_as_default:
        tomlconf.set_value(engine, "runtime", name)
    runtimes = tomlconf.ensure_table(engine, ["runtimes"])
    tomlconf.set_value(runtimes, name, [wrapper])
    return []
