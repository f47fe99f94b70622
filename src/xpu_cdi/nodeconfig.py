"""The node config file, ``/etc/xpu-cdi/config.yaml``: settings of this node's hook and wrapper.

One setting so far, read by the hook and the wrapper (in C) and here, for
``doctor``:

``accept-env-selection-when-unprivileged`` (bool, default ``true``)
    Whether selection variables (``CXPU_VISIBLE_DEVICES``,
    ``ASCEND_VISIBLE_DEVICES``, ...) of a container that is not privileged
    select cards.  Any pod author can set such a variable, in the image or
    the pod spec, and get cards the scheduler never gave the pod; where a
    device plugin hands out the cards (Kubernetes), set it to ``false``:
    ``cdi.k8s.io/`` annotations and CDI devices still select, and
    privileged containers (all capabilities) still may.

``kubernetes-allocation`` (``device-plugin`` or ``dra``, or a mapping of CDI
    kind to one of them; default: unset)
    Which way Kubernetes gets this node's cards of a kind: the device plugin
    (``xpu-cdi device-plugin``) or the DRA driver (``xpu-cdi dra-driver``).
    A daemon never serves a kind the file gives to the other; unset, the
    first to start serves it and the other refuses it while the first runs
    (:mod:`xpu_cdi.servemode`).  Two ways for one kind would let two pods
    get the same card.

An absent file means the defaults; a file that is not a YAML mapping, or a
setting of the wrong type, is a :class:`~xpu_cdi.errors.ConfigError` (the
hook and the wrapper fail closed on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .errors import ConfigError

DEFAULT_PATH = "/etc/xpu-cdi/config.yaml"
ACCEPT_ENV = "accept-env-selection-when-unprivileged"
ALLOCATION = "kubernetes-allocation"
WAYS = ("device-plugin", "dra")
DEFAULTS: Dict[str, Any] = {ACCEPT_ENV: True, ALLOCATION: None}


@dataclass(frozen=True)
class NodeConfig:
    """What the file says (or the defaults)."""

    path: str
    exists: bool
    accept_env_selection_when_unprivileged: bool = True
    allocation: Tuple[Tuple[str, str], ...] = ()  # (kind or "*", way)
    unknown: Tuple[str, ...] = field(default_factory=tuple)  # keys this version does not know


def read_yaml(path: str, what: str) -> Tuple[bool, Any]:
    """``(exists, parsed YAML)`` of a small settings file (``(False, None)`` when absent).

    Raises:
        ConfigError: unreadable or not YAML, worded ``<what> '<path>': ...``.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except FileNotFoundError:
        return False, None
    except OSError as err:
        raise ConfigError(f"{what} {path!r}: cannot read: {err.strerror}") from None
    import yaml

    try:
        return True, yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {path!r}: not valid YAML: {' '.join(str(err).split())}") from None


def read(path: str = DEFAULT_PATH) -> NodeConfig:
    """The node config at *path*; defaults when it does not exist.

    Raises:
        ConfigError: unreadable, not YAML, not a mapping, or a setting of the wrong type.
    """
    exists, data = read_yaml(path, "node config")
    if not exists:
        return NodeConfig(path, False)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"node config {path!r}: expected a mapping such as `{ACCEPT_ENV}: false`")
    accept = data.get(ACCEPT_ENV, DEFAULTS[ACCEPT_ENV])
    if not isinstance(accept, bool):
        raise ConfigError(f"node config {path!r}: {ACCEPT_ENV} must be true or false, not {accept!r}")
    unknown = tuple(sorted(str(k) for k in data if k not in DEFAULTS))
    return NodeConfig(path, True, accept, _allocation(path, data.get(ALLOCATION)), unknown)


def _allocation(path: str, value: Any) -> Tuple[Tuple[str, str], ...]:
    bad = ConfigError(f"node config {path!r}: {ALLOCATION} must be {' or '.join(WAYS)}, or a mapping of CDI kind "
                      f"to one of them (kunlunxin.com/xpu: dra)")
    if value is None:
        return ()
    if isinstance(value, str):
        if value not in WAYS:
            raise bad
        return (("*", value),)
    if not isinstance(value, dict):
        raise bad
    out = []
    for kind, way in value.items():
        if not isinstance(kind, str) or kind.count("/") != 1 or way not in WAYS:
            raise bad
        out.append((kind, way))
    return tuple(out)


def way_for(cfg: NodeConfig, kind: str) -> Optional[str]:
    """The way the node config gives *kind* to (``device-plugin`` / ``dra``), or None when it does not say."""
    named = dict(cfg.allocation)
    return named.get(kind, named.get("*"))
