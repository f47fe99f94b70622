"""The device plugin's settings: built-in defaults, then a YAML config file, then
``XPU_CDI_*`` environment variables, then flags (clikit.read_from_env).

The config file (default ``/etc/xpu-cdi/device-plugin.yaml``; absent = defaults,
but a file named with ``--config`` must exist) has the shape of NVIDIA's
k8s-device-plugin config (its ``api/config/v1``)::

    version: v1
    flags:                        # our long flags in camelCase: --plugin-dir -> pluginDir
      pluginDir: /var/lib/kubelet/device-plugins
      specDir: [/etc/cdi, /var/run/cdi]
      resourceName: {huawei.com/npu: huawei.com/Ascend910}
      resourceNaming: model       # one resource per card model, as the vendor's plugin names it
      nvidiaDriverRoot: /         # NVIDIA's names where the meaning is ours (= driverRoot)
      migStrategy: none           # NVIDIA's settings whose value is what we always do
      plugin: {deviceListStrategy: [cdi-cri, cdi-annotations], passDeviceSpecs: false}
    sharing: {timeSlicing: {resources: [{name: huawei.com/npu, replicas: 4}]}}   # node/sharing.py

The keys of before (the long flags at the top, ``plugin-dir: ...``) are still read, with one
deprecation line. Any bad key or value is one :class:`~xpu_cdi.errors.ConfigError` line
naming the file, the key and what is allowed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from .. import bounded, remedy
from ..errors import ConfigError
from ..nodeconfig import read_yaml
from ..node.settings import HEALTH_INTERVAL, HEALTH_INTERVAL_RANGE, NodeSettings
from . import naming, response
from ..node.status import DEFAULT_STATUS_FILE
from ..node.uevents import SOURCES as UEVENT_SOURCES
from ..node.sharing import Replicated, TimeSlicing, parse as parse_sharing

DEFAULT_CONFIG = "/etc/xpu-cdi/device-plugin.yaml"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # kubelet's DevicePluginPath
DEFAULT_POD_RESOURCES = "/var/lib/kubelet/pod-resources/kubelet.sock"
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
    sharing: Optional[TimeSlicing] = None  # time-slicing replicas (node/sharing.py)
    # remediation (issue 43, deviceplugin/evict.py): CDI kind -> its policy; none: today's behaviour
    evict: Dict[str, remedy.Policy] = field(default_factory=dict)
    node_name: str = ""  # the node the plugin runs on (--node-name, $NODE_NAME): whose pods it may evict
    kubeconfig: Optional[str] = None  # the API server, for evictions only (default: the pod's service account)
    pod_resources_socket: str = DEFAULT_POD_RESOURCES  # kubelet's PodResources: who holds a card

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


def _evict(v: Any) -> Dict[str, remedy.Policy]:
    """``KIND[:grace=S][,hold-down=S]``, one or a list (never split at commas: hold-down follows one)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError("must be a string or a list of strings (kunlunxin.com/xpu:grace=30)")
    try:
        return remedy.parse(items)
    except ConfigError as err:
        raise ValueError(str(err)) from None


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
    "evict": ("evict", _evict), "node-name": ("node_name", _str), "kubeconfig": ("kubeconfig", _str),
    "pod-resources-socket": ("pod_resources_socket", _str),
    "sharing": ("sharing", parse_sharing),
}


VERSION = "v1"  # NVIDIA's config version; the only one
FLAG_KEYS = {re.sub(r"-([a-z])", lambda m: m.group(1).upper(), k): k for k in KEYS if k != "sharing"}
# NVIDIA's flags whose meaning is one of ours: its name -> our key
NVIDIA_KEYS = {"nvidiaDriverRoot": "driver-root", "nvidiaDevRoot": "dev-root",
               "plugin.deviceListStrategy": "device-list-strategy"}
# NVIDIA's flags whose one value is what xpu-cdi always does: accepted with that value, refused with another
NVIDIA_FIXED: Dict[str, Tuple[Any, str]] = {
    "migStrategy": ("none", "xpu-cdi has no MIG; cards are partitioned through the DRA driver (docs/dra.md)"),
    "failOnInitError": (False, "the plugin waits for cards and specs instead of exiting"),
    "restartOnDeviceUnhealthy": (False, "an unhealthy card is reported Unhealthy to kubelet, the plugin goes on"),
    "gdsEnabled": (False, "GPUDirect Storage is NVIDIA's"), "mofedEnabled": (False, "MOFED is not mounted by us"),
    "plugin.passDeviceSpecs": (False, "the CDI spec adds the device nodes, Allocate passes none"),
}
Warn = Callable[[str], None]


def _flatten(flags: Any, where: str, prefix: str = "") -> Dict[str, Any]:
    """``flags:`` as ``{key: value}``, ``plugin:``'s keys as ``plugin.<key>``."""
    if not isinstance(flags, Mapping):
        name = "flags." + prefix.rstrip(".") if prefix else "flags"
        raise ConfigError(f"{where}: {name}: expected a mapping (flags: {{pluginDir: ...}})")
    out: Dict[str, Any] = {}
    for key, value in flags.items():
        if key == "plugin" and not prefix:
            out.update(_flatten(value, where, "plugin."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _from_v1(data: Mapping[Any, Any], where: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """NVIDIA's shape: ``version: v1``, ``flags:``, ``sharing:`` -> our keys, and the key each was
    written as (``flags.plugin.deviceListStrategy``), for the error lines."""
    for key in data:
        if key not in ("version", "flags", "sharing"):
            hint = f": under flags: as {bounded.short(_camel(key))}" if key in KEYS else ""
            raise ConfigError(f"{where}: unknown setting {bounded.short(key)} in a version: v1 file (version, "
                              f"flags, sharing){hint}")
    if data.get("version", VERSION) != VERSION:
        raise ConfigError(f"{where}: version: {bounded.short(data['version'])} is not known: write version: v1")
    ours: Dict[str, Any] = {}
    written = {"sharing": "sharing"}
    flags = data.get("flags")
    for key, value in _flatten({} if flags is None else flags, where).items():
        if key in NVIDIA_FIXED:
            only, why = NVIDIA_FIXED[key]
            if value != only or type(value) is not type(only):
                raise ConfigError(f"{where}: flags.{key}: only {str(only).lower()} is supported ({why})")
        elif key in FLAG_KEYS or key in NVIDIA_KEYS:
            target = FLAG_KEYS.get(key) or NVIDIA_KEYS[key]
            if target in ours:  # driverRoot and nvidiaDriverRoot: one setting, said twice
                raise ConfigError(f"{where}: flags.{key} and {written[target]} are the same setting: keep one")
            ours[target] = value
            written[target] = f"flags.{key}"
        else:
            raise ConfigError(f"{where}: unknown setting {bounded.short(f'flags.{key}')}: use "
                              f"{', '.join(sorted([*FLAG_KEYS, *NVIDIA_KEYS, *NVIDIA_FIXED]))} (docs/device-plugin.md)")
    if "sharing" in data:
        ours["sharing"] = data["sharing"]
    return ours, written


def _camel(key: str) -> str:
    return next((c for c, k in FLAG_KEYS.items() if k == key), key)


def from_mapping(data: Any, where: str, warn: Optional[Warn] = None) -> Dict[str, Any]:
    """Settings fields from a config mapping: NVIDIA's shape (``version``/``flags``/``sharing``),
    or the long flags at the top as before (one deprecation line through *warn*)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings (version: v1, flags: {{pluginDir: ...}})")
    written: Dict[str, str] = {}
    if "version" in data or "flags" in data:
        data, written = _from_v1(data, where)
    elif set(data) - {"sharing"} and warn is not None:
        warn(f"{where}: settings at the top (plugin-dir: ...) are deprecated: write version: v1 and put them "
             f"under flags: in camelCase ({', '.join(_camel(k) for k in data if k in KEYS and k != 'sharing')})")
    out: Dict[str, Any] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown setting {bounded.short(key)}: use version: v1 with flags: "
                              f"{{{', '.join(sorted(FLAG_KEYS))}}} and sharing:")
        name, parse = KEYS[key]
        try:
            out[name] = parse(value)
        except ValueError as err:
            raise ConfigError(f"{where}: {written.get(key, key)}: {' '.join(str(err).split())[:300]}") from None
    return out


def read_file(path: str, explicit: bool, warn: Optional[Warn] = None) -> Dict[str, Any]:
    """The settings of a config file; ``{}`` for an absent default file.

    Raises:
        ConfigError: unreadable, not YAML, or a bad setting; an explicit file that is absent.
    """
    exists, data = read_yaml(path, "config file")
    if not exists:
        if explicit:
            raise ConfigError(f"config file {path!r} does not exist: create it or drop --config")
        return {}
    return from_mapping(data, f"config file {path!r}", warn)


def build(config_path: Optional[str], flags: Mapping[str, Any], warn: Optional[Warn] = None) -> Settings:
    """Defaults, overridden by the config file, overridden by the flags that were given (not None):
    a flag on the command line or its ``XPU_CDI_*`` variable, click having put the flag first."""
    values = read_file(config_path or DEFAULT_CONFIG, explicit=config_path is not None, warn=warn)
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
    if s.evict and not os.path.isabs(s.pod_resources_socket):
        raise ConfigError(f"--pod-resources-socket {s.pod_resources_socket!r} must be absolute")


def parse_flag(name: str, values: Sequence[str]) -> Any:
    """A repeatable string flag through its config-file parser; None when not given."""
    if not values:
        return None
    try:
        return flag_parsers()[name](list(values))
    except ValueError as err:
        flag = next(k for k, (n, _p) in KEYS.items() if n == name)
        raise ConfigError(f"--{flag}: {err}") from None
