"""The device plugin's settings: built-in defaults, then a YAML config file, then flags.

The config file (default ``/etc/xpu-cdi/device-plugin.yaml``; absent = defaults,
but a file named with ``--config`` must exist) is a mapping whose keys are
the long flag names::

    plugin-dir: /var/lib/kubelet/device-plugins
    spec-dir: [/etc/cdi, /var/run/cdi]
    resource-name: {huawei.com/npu: huawei.com/Ascend910}
    resource-naming: model       # one resource per card model, as the vendor's plugin names it
    device-list-strategy: [cdi-cri, cdi-annotations]
    sharing: {timeSlicing: {resources: [{name: huawei.com/npu, replicas: 4}]}}   # file only (deviceplugin/sharing.py)

Any bad key or value is one :class:`~xpu_cdi.errors.ConfigError` line naming
the file, the key and what is allowed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .. import bounded
from ..errors import ConfigError
from ..nodeconfig import read_yaml
from ..node.settings import HEALTH_INTERVAL, HEALTH_INTERVAL_RANGE, NodeSettings
from . import naming, response
from ..node.status import DEFAULT_STATUS_FILE
from ..node.uevents import SOURCES as UEVENT_SOURCES
from .sharing import Replicated, TimeSlicing, parse as parse_sharing

DEFAULT_CONFIG = "/etc/xpu-cdi/device-plugin.yaml"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # kubelet's DevicePluginPath
# an extended resource name: <domain>/<name>, name a qualified-name part (kubelet's rule)
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Settings(NodeSettings):
    """Everything the daemon needs to know."""

    plugin_dir: str = DEFAULT_PLUGIN_DIR
    resource_names: Dict[str, str] = field(default_factory=dict)  # CDI kind -> resource name
    resource_naming: str = naming.KIND  # or naming.MODEL: a resource per card model (naming.py)
    strategies: Tuple[str, ...] = response.DEFAULT_STRATEGIES
    status_file: str = DEFAULT_STATUS_FILE
    health_interval: float = HEALTH_INTERVAL
    removal_grace: float = 300.0  # seconds a card no spec defines stays listed (Unhealthy) before it goes
    uevents: str = "auto"
    node_config: str = "/etc/xpu-cdi/config.yaml"  # kubernetes-allocation: which way serves each kind
    sharing: Optional[TimeSlicing] = None  # time-slicing replicas (deviceplugin/sharing.py)

    @property
    def run_dir(self) -> str:
        """The status file's directory (the host's /run/xpu-cdi): also where the one-way-per-kind locks are."""
        return os.path.dirname(self.status_file)

    def resource(self, unit: str) -> str:
        """The resource name advertised for a kind (default: the kind itself) or a model resource (itself);
        a time-slicing rename wins."""
        plan = self.replication(unit)
        return plan.rename if plan is not None and plan.rename else self.resource_names.get(unit, unit)

    def replication(self, unit: str) -> Optional[Replicated]:
        """How a kind's or a model resource's cards are time-sliced, or None (whole cards)."""
        return self.sharing.for_kind(unit, self.resource_names.get(unit, unit)) if self.sharing else None


# config key -> (Settings field, parser)
def _str(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError("must be a non-empty string")
    return v


def _strs(v: Any) -> Tuple[str, ...]:
    """A list of strings; a string (or list item) may hold several, comma-separated."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError("must be a string or a list of strings")
    out = tuple(p.strip() for i in items for p in i.split(","))
    if not out or not all(out):
        raise ValueError("must not be empty")
    return out


def _float(v: Any) -> float:
    return bounded.seconds(v, *HEALTH_INTERVAL_RANGE)


def parse_resource_names(v: Any) -> Dict[str, str]:
    """``{kind: name}`` from a mapping or from ``KIND=NAME`` strings.

    Raises:
        ValueError: a bad shape or a name kubelet would refuse.
    """
    pairs: Dict[str, str] = {}
    if isinstance(v, Mapping):
        items = list(v.items())
    else:
        items = []
        for item in _strs(v):
            kind, sep, name = item.partition("=")
            if not sep:
                raise ValueError(f"{item!r} is not KIND=NAME (e.g. huawei.com/npu=huawei.com/Ascend910)")
            items.append((kind, name))
    for kind, name in items:
        if not isinstance(kind, str) or not isinstance(name, str) or kind.count("/") != 1:
            raise ValueError(f"{kind!r}: the key must be a CDI kind (vendor/class)")
        problem = resource_problem(name)
        if problem:
            raise ValueError(problem)
        pairs[kind] = name
    return pairs


def resource_problem(name: str) -> str:
    """Why kubelet would refuse *name* as an extended resource name, or ``""``."""
    if not _RESOURCE.match(name) or len(name.partition("/")[2]) > 63 or "kubernetes.io" in name:
        return (f"resource name {name!r} is not an extended resource name "
                f"(<domain>/<name>, lowercase domain, not kubernetes.io)")
    return ""


def _strategies(v: Any) -> Tuple[str, ...]:
    items = _strs(v)
    bad = [s for s in items if s not in response.STRATEGIES]
    if bad:
        raise ValueError(f"unknown strategy {bad[0]!r}: use {', '.join(response.STRATEGIES)}")
    return tuple(dict.fromkeys(items))


REMOVAL_GRACE_RANGE = (0.0, 86400.0)


def _seconds(v: Any) -> float:
    return bounded.seconds(v, *REMOVAL_GRACE_RANGE)


def _naming(v: Any) -> str:
    if v not in naming.NAMINGS:
        raise ValueError(f"must be one of {', '.join(naming.NAMINGS)}")
    return str(v)


def _uevents(v: Any) -> str:
    if v not in UEVENT_SOURCES:
        raise ValueError(f"must be one of {', '.join(UEVENT_SOURCES)}")
    return str(v)


KEYS = {
    "plugin-dir": ("plugin_dir", _str), "spec-dir": ("spec_dirs", _strs), "dev-root": ("dev_root", _str),
    "driver-root": ("driver_root", _str), "sysfs-root": ("sysfs_root", _str), "proc-root": ("proc_root", _str),
    "profile": ("profiles", _strs), "profiles-dir": ("profiles_dir", _strs),
    "resource-name": ("resource_names", parse_resource_names), "device-list-strategy": ("strategies", _strategies),
    "status-file": ("status_file", _str), "health-interval": ("health_interval", _float),
    "removal-grace": ("removal_grace", _seconds), "resource-naming": ("resource_naming", _naming),
    "uevents": ("uevents", _uevents), "node-config": ("node_config", _str),
    "sharing": ("sharing", parse_sharing),
}


def from_mapping(data: Any, where: str) -> Dict[str, Any]:
    """Settings fields from a config mapping (keys as the long flags)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings (plugin-dir: ..., spec-dir: [...])")
    out: Dict[str, Any] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown setting {bounded.short(key)}: use {', '.join(sorted(KEYS))}")
        name, parse = KEYS[key]
        try:
            out[name] = parse(value)
        except ValueError as err:
            raise ConfigError(f"{where}: {key}: {' '.join(str(err).split())[:300]}") from None
    return out


def read_file(path: str, explicit: bool) -> Dict[str, Any]:
    """The settings of a config file; ``{}`` for an absent default file.

    Raises:
        ConfigError: unreadable, not YAML, or a bad setting; an explicit file that is absent.
    """
    exists, data = read_yaml(path, "config file")
    if not exists:
        if explicit:
            raise ConfigError(f"config file {path!r} does not exist: create it or drop --config")
        return {}
    return from_mapping(data, f"config file {path!r}")


def build(config_path: Optional[str], flags: Mapping[str, Any]) -> Settings:
    """Defaults, overridden by the config file, overridden by the flags that were given (not None)."""
    values = read_file(config_path or DEFAULT_CONFIG, explicit=config_path is not None)
    values.update({k: v for k, v in flags.items() if v is not None})
    settings = replace(Settings(), **values)
    for name in ("plugin_dir", "dev_root", "driver_root", "sysfs_root", "status_file"):
        settings = replace(settings, **{name: os.path.abspath(getattr(settings, name))})
    return replace(settings, spec_dirs=tuple(os.path.abspath(d) for d in settings.spec_dirs),
                   proc_root=os.path.abspath(settings.proc_root) if settings.proc_root else None)


def flag_parsers() -> Dict[str, Any]:
    """Settings field -> parser, for flags given as strings (``--resource-name``, ``--device-list-strategy``)."""
    return {name: parse for name, parse in KEYS.values()}


def check_settings(s: Settings) -> None:
    """Refuse settings that cannot work, in one line each."""
    if not os.path.isabs(s.plugin_dir):
        raise ConfigError(f"--plugin-dir {s.plugin_dir!r} must be absolute")
    if not s.strategies:
        raise ConfigError("--device-list-strategy: give at least one of " + ", ".join(response.STRATEGIES))


def parse_flag(name: str, values: Sequence[str]) -> Any:
    """A repeatable string flag through its config-file parser; None when not given."""
    if not values:
        return None
    try:
        return flag_parsers()[name](list(values))
    except ValueError as err:
        flag = next(k for k, (n, _p) in KEYS.items() if n == name)
        raise ConfigError(f"--{flag}: {err}") from None
