"""The node config file, ``/etc/xpu-cdi/config.yaml``: settings of this node's hook and wrapper.

The hook and the wrapper (in C) read the first setting, ``doctor`` reads it
here; the daemons the second; the DaemonSet's optional runtime wiring
(``xpu-cdi host wire-runtime``, :mod:`xpu_cdi.host.wiring`) the last two:

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
    (:mod:`xpu_cdi.node.servemode`).  Two ways for one kind would let two pods
    get the same card.

``configure-containerd`` (bool, default ``false``)
    Whether the DaemonSet's runtime wiring configures this host's containerd
    (``runtime configure --enable-cdi``: CDI on for 1.7, the ``xpu`` handler).

``restart-containerd`` (bool, default ``true``)
    Whether that wiring also restarts containerd when the files it wrote are
    newer than the running containerd (containers keep running: their shims
    outlive the daemon); ``false`` leaves the restart to the admin.

An absent file means the defaults; a file that is not a YAML mapping, or a
setting of the wrong type, is a :class:`~xpu_cdi.errors.ConfigError` (the
hook and the wrapper fail closed on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from . import bounded
from .errors import ConfigError

DEFAULT_PATH = "/etc/xpu-cdi/config.yaml"
MAX_BYTES = 1 << 20
ACCEPT_ENV = "accept-env-selection-when-unprivileged"
ALLOCATION = "kubernetes-allocation"
WAYS = ("device-plugin", "dra")
CONFIGURE_CONTAINERD = "configure-containerd"
RESTART_CONTAINERD = "restart-containerd"
DEFAULTS: Dict[str, Any] = {ACCEPT_ENV: True, ALLOCATION: None, CONFIGURE_CONTAINERD: False, RESTART_CONTAINERD: True}
BOOLS = (ACCEPT_ENV, CONFIGURE_CONTAINERD, RESTART_CONTAINERD)


@dataclass(frozen=True)
class NodeConfig:
    """What the file says (or the defaults)."""

    path: str
    exists: bool
    accept_env_selection_when_unprivileged: bool = True
    allocation: Tuple[Tuple[str, str], ...] = ()  # (kind or "*", way)
    unknown: Tuple[str, ...] = field(default_factory=tuple)  # keys this version does not know
    configure_containerd: bool = False
    restart_containerd: bool = True


def read_yaml(path: str, what: str) -> Tuple[bool, Any]:
    """``(exists, parsed YAML)`` of a small settings file (``(False, None)`` when absent).

    Raises:
        ConfigError: unreadable, not a regular file, over 1 MiB, or not YAML (nesting and aliases
            bounded, :mod:`xpu_cdi.bounded`), worded ``<what> '<path>': ...``.
    """
    try:
        raw = bounded.read(path, MAX_BYTES)
    except FileNotFoundError:
        return False, None
    except OSError as err:
        raise ConfigError(f"{what} {path!r}: cannot read: {err.strerror}") from None
    except bounded.InputError as err:
        raise ConfigError(f"{what} {path!r}: {err}") from None
    import yaml

    from .cdi import yamlload

    try:
        return True, yamlload.load(raw, max_nodes=bounded.MAX_SETTINGS_NODES)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {path!r}: not valid YAML: {' '.join(str(err).split())[:300]}") from None


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
    flags = {}
    for key in BOOLS:
        value = data.get(key, DEFAULTS[key])
        if not isinstance(value, bool):
            raise ConfigError(f"node config {path!r}: {key} must be true or false, not {bounded.short(value)}")
        flags[key] = value
    unknown = tuple(sorted(str(k) for k in data if k not in DEFAULTS))
    return NodeConfig(path, True, flags[ACCEPT_ENV], _allocation(path, data.get(ALLOCATION)), unknown,
                      flags[CONFIGURE_CONTAINERD], flags[RESTART_CONTAINERD])


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
