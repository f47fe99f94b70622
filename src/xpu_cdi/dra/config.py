"""The DRA driver's settings: flags, with the pod's downward-API environment as defaults, and its
config file (``--config``, default ``/etc/xpu-cdi/dra-driver.yaml`` where present)::

    version: v1
    remediation:                  # xpu_cdi.remedy: evict the pods of a card unhealthy for the grace
      kunlunxin.com/xpu: {grace: 30, holdDown: 300}   # evict: true unless said otherwise

``--evict`` (or ``XPU_CDI_EVICT``) wins over the file for the kinds it names.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence

from .. import remedy
from ..errors import ConfigError

from ..nodeconfig import read_yaml
from ..node.settings import HEALTH_INTERVAL, NodeSettings
from .shares import Policy

KUBELET_DIR = "/var/lib/kubelet"
REGISTRY_DIR = f"{KUBELET_DIR}/plugins_registry"  # kubelet's plugin watcher
PLUGINS_DIR = f"{KUBELET_DIR}/plugins"  # <driver>/dra-<pod uid>.sock, checkpoint.json
RUN_DIR = "/run/xpu-cdi"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
CONFIG_FILE = "/etc/xpu-cdi/dra-driver.yaml"
CONFIG_KEYS = ("version", "remediation")
# a driver name is a DNS subdomain of at most 63 characters (ResourceSlice validation)
_DRIVER = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Settings(NodeSettings):
    node_name: str = ""  # what node_name() gives: checked, never empty
    kubeconfig: Optional[str] = None
    registry_dir: str = REGISTRY_DIR
    plugins_dir: str = PLUGINS_DIR
    run_dir: str = RUN_DIR
    pod_uid: str = ""
    driver_names: Dict[str, str] = field(default_factory=dict)  # CDI kind -> driver name
    node_config: str = "/etc/xpu-cdi/config.yaml"
    health_interval: float = HEALTH_INTERVAL
    health_service: bool = True
    boot_id_file: str = BOOT_ID_FILE
    shares: Dict[str, Policy] = field(default_factory=dict)  # CDI kind -> its capacity sharing
    vnpu_tool: str = ""  # the vendor's partitioning tool; "" = the partition data's, in <driver root>/usr/local/bin
    remedy: Dict[str, remedy.Policy] = field(default_factory=dict)  # CDI kind -> what its unhealthy cards get

    def policy(self, kind: str) -> remedy.Policy:
        """*kind*'s remediation: today's behaviour (a NoSchedule taint, nothing evicted) unless set."""
        return self.remedy.get(kind, remedy.Policy())

    def driver(self, kind: str) -> str:
        """The driver name of *kind*: the CDI vendor unless set (``kunlunxin.com``)."""
        return self.driver_names.get(kind, kind.partition("/")[0])

    @property
    def claim_spec_dir(self) -> str:
        """Where claim-scoped specs go: the last (highest-priority) spec dir, /var/run/cdi by default."""
        return self.spec_dirs[-1]

    def plugin_dir(self, driver: str) -> str:
        return os.path.join(self.plugins_dir, driver)

    @property
    def status_file(self) -> str:
        return os.path.join(self.run_dir, f"dra-driver-{self.pod_uid or os.getpid()}.json")


def driver_problem(name: str) -> str:
    """Why *name* cannot be a DRA driver name, or ``""``."""
    if not _DRIVER.match(name):
        return f"driver name {name!r} is not a lowercase DNS subdomain of at most 63 characters"
    return ""


def parse_driver_names(values: Sequence[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in values:
        for part in item.split(","):
            kind, sep, name = part.strip().partition("=")
            if not sep or kind.count("/") != 1:
                raise ConfigError(f"--driver-name {part!r}: write KIND=NAME (kunlunxin.com/xpu=xpu.kunlunxin.com)")
            problem = driver_problem(name)
            if problem:
                raise ConfigError(f"--driver-name {part!r}: {problem}")
            out[kind] = name
    return out


def check(s: Settings) -> None:
    for name in ("registry_dir", "plugins_dir", "run_dir"):
        if not os.path.isabs(getattr(s, name)):
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(s, name)!r} must be absolute")
    if s.pod_uid and not re.match(r"^[A-Za-z0-9-]{1,64}$", s.pod_uid):
        raise ConfigError(f"--pod-uid {s.pod_uid!r} is not a pod uid")


def read_config(path: str, given: bool) -> Dict[str, remedy.Policy]:
    """The remediation of the config file at *path* (*given*: named by ``--config``, so it must exist).

    Raises:
        ConfigError: missing though given, unreadable, not YAML, or a bad key or value (one line).
    """
    exists, doc = read_yaml(path, "config file")
    if not exists:
        if given:
            raise ConfigError(f"config file {path!r} does not exist: create it or drop --config")
        return {}
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise ConfigError(f"config file {path!r}: expected a mapping (version: v1, remediation: ...)")
    unknown = sorted(str(k) for k in doc if k not in CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"config file {path!r}: unknown key {unknown[0]!r} (known: {', '.join(CONFIG_KEYS)})")
    if doc.get("version", "v1") != "v1":
        raise ConfigError(f"config file {path!r}: version {doc['version']!r} is not v1")
    return remedy.from_config(doc.get("remediation"), f"config file {path!r}: remediation")
