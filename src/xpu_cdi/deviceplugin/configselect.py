"""``xpu-cdi device-plugin-config``: a node label picks the device plugin's config file, as the
label ``nvidia.com/device-plugin.config`` and the config-manager sidecar do for NVIDIA's plugin.

The named configs are files in one directory (the chart's ConfigMap
``xpu-cdi-device-plugin-configs`` mounted: one file per name, kubelet's ``..data`` entries
skipped).  The node's label ``xpu-cdi.io/device-plugin-config`` names one; no label (or an empty
value) means ``--default-config``.  The chosen file is checked as the plugin would read it
(:func:`config.from_mapping`) and written to ``--output`` atomically; the plugin follows that file
(inotify) and reloads.  A name no file has, or a file the plugin would refuse, is one warning line
and the file written before stays (where none was written yet: the default).

The process reads its own Node only: a list and a watch with the field selector
``metadata.name=<node>``, the name from the downward API.  Its role must grant get, list and watch
on nodes, which is a read of any Node: RBAC names objects only when the role is written, and a
DaemonSet's node is known only at run time.  It writes nothing through the API.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from .. import atomic, bounded
from ..errors import ApiError, ConfigError
from ..log import WARNING, Log
from . import config

DEFAULT_LABEL = "xpu-cdi.io/device-plugin-config"
DEFAULT_CONFIGS_DIR = "/etc/xpu-cdi/device-plugin-configs"
DEFAULT_NAME = "default"
NODES = "/api/v1/nodes"
MAX_BACKOFF = 30.0


def available(configs_dir: str) -> Dict[str, str]:
    """Config name -> path of each regular file in *configs_dir* (a ConfigMap's ``..data`` and other
    dot entries are not configs).

    Raises:
        ConfigError: the directory cannot be listed.
    """
    try:
        names = os.listdir(configs_dir)
    except OSError as err:
        raise ConfigError(f"configs directory {configs_dir!r}: cannot list: {err.strerror}") from None
    out = {}
    for name in names:
        path = os.path.join(configs_dir, name)
        if not name.startswith(".") and os.path.isfile(path):
            out[name] = path
    return out


def checked(path: str, name: str) -> bytes:
    """The bytes of config *name* at *path*, once they parse as the plugin's config file.

    Raises:
        ConfigError: unreadable, not YAML, or a setting the plugin refuses (the plugin's own line).
    """
    from ..cdi import yamlload
    from ..nodeconfig import MAX_BYTES

    where = f"config {name!r} ({path})"
    try:
        raw = bounded.read(path, MAX_BYTES)
    except OSError as err:
        raise ConfigError(f"{where}: cannot read: {err.strerror}") from None
    except bounded.InputError as err:
        raise ConfigError(f"{where}: {err}") from None
    import yaml

    try:
        data = yamlload.load(raw, max_nodes=bounded.MAX_SETTINGS_NODES)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML: {' '.join(str(err).split())[:300]}") from None
    config.from_mapping(data, where)
    return raw


class Selector:
    """The config a label value picks, written to *output* when it differs from what is there."""

    def __init__(self, configs_dir: str, output: str, default: str, label: str, log: Log) -> None:
        self.configs_dir, self.output, self.default, self.label, self.log = configs_dir, output, default, label, log
        self.current: Optional[str] = None  # the name last written or found in place
        self.said: Optional[str] = None  # the last warning, said once until something else happens

    def warn(self, line: str) -> None:
        if line != self.said:
            self.log(line, WARNING)
            self.said = line

    def apply(self, value: Optional[str]) -> bool:
        """Bring *output* to the config label value *value* names (None or ``""``: the default).

        Returns whether the file was written.  A name with no file, or a file the plugin would
        refuse, is one warning line and the file stays; with no file there yet, the default is
        written instead."""
        name = value or self.default
        label = f"{self.label}={value}" if value else f"no {self.label} label"
        try:
            files = available(self.configs_dir)
            if name not in files:
                raise ConfigError(f"{label}: no config named {name!r} in {self.configs_dir} "
                                  f"(there are: {', '.join(sorted(files)) or 'none'})")
            data = checked(files[name], name)
        except ConfigError as err:
            if self.current is None and not os.path.exists(self.output) and name != self.default:
                self.warn(f"{err}: the default config {self.default!r} is used until the label is fixed")
                return self.apply(None)
            kept = f"config {self.current!r}" if self.current else f"{self.output} as it is"
            self.warn(f"{err}: {kept} stays")
            return False
        self.said = None
        try:
            if bounded.read(self.output, len(data)) == data:
                if self.current != name:
                    self.log(f"{label}: config {name!r} is in place in {self.output}")
                self.current = name
                return False
        except (OSError, bounded.InputError):
            pass  # absent or other: written below
        try:
            atomic.write_atomic(self.output, data, 0o644)
        except OSError as err:
            raise ConfigError(f"cannot write {self.output}: {err.strerror}") from None
        self.log(f"{label}: config {name!r} written to {self.output} (the plugin reloads it)")
        self.current = name
        return True


def field_selector(node: str) -> Dict[str, str]:
    return {"fieldSelector": f"metadata.name={node}"}


def node_label(kube: Any, node: str, label: str) -> Tuple[Optional[str], str]:
    """The value of *label* on Node *node* (None: not set) and the list's resourceVersion.

    Raises:
        ApiError: the API server refused or was not reached; the node does not exist (404).
    """
    doc = kube.get(NODES, field_selector(node))
    items = doc.get("items") or []
    if not items:
        raise ApiError(404, f"node {node!r} not found (the node name comes from --node or NODE_NAME)")
    labels = (items[0].get("metadata") or {}).get("labels") or {}
    return labels.get(label), str((doc.get("metadata") or {}).get("resourceVersion", ""))


def label_changes(kube: Any, node: str, label: str, resync: float) -> Iterator[Optional[str]]:
    """The label's value now, then each time an event of the node's watch carries it, until the watch
    ends (after *resync* seconds at most, or a 410 Gone): then the caller lists again."""
    value, version = node_label(kube, node, label)
    yield value
    query = dict(field_selector(node), resourceVersion=version)
    for kind, obj in kube.watch(NODES, query, max(1, int(resync))):
        if kind == "ERROR":
            return
        if kind in ("ADDED", "MODIFIED"):  # DELETED: the node is going, the config in place stays
            yield ((obj.get("metadata") or {}).get("labels") or {}).get(label)


def run(kube: Any, node: str, selector: Selector, resync: float, once: bool,
        stop: Optional[threading.Event] = None, sleep: Optional[Callable[[float], Any]] = None) -> int:
    """Keep *selector*'s output at the config the node's label names, until *stop* (or one pass,
    *once*: its API errors raise).  Errors of the API server are one line each, retried with a
    backoff (0.5 s doubling to 30 s): a restarting API server must not stop the plugin's config."""
    stop = stop or threading.Event()
    wait = sleep or stop.wait
    if once:
        value, _ = node_label(kube, node, selector.label)
        selector.apply(value)
        if not os.path.exists(selector.output):  # the plugin would not start: the init container fails, saying why
            raise ConfigError(f"{selector.said or 'no config written'}: nothing to start the plugin with")
        return 0
    backoff = 0.5
    last_error = ""
    while not stop.is_set():
        try:
            for value in label_changes(kube, node, selector.label, resync):
                selector.apply(value)
                backoff, last_error = 0.5, ""
                if stop.is_set():
                    break
        except ApiError as err:
            if str(err) != last_error:
                selector.log(f"node {node}: {err}: retrying (the config in place stays)", WARNING)
                last_error = str(err)
            wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
        except ConfigError as err:  # the configs directory went, the output cannot be written
            selector.warn(str(err))
            wait(resync)
    return 0


def main(node: Optional[str], kubeconfig: Optional[str], node_label_key: str, configs_dir: str, default: str,
         output: str, resync: float, once: bool, log: Log) -> int:
    """The command's body (``device-plugin-config``)."""
    if not node:
        raise ConfigError("--node is needed (or NODE_NAME, as the chart sets it from spec.nodeName): the node "
                          "whose label picks the config")
    from ..kube.client import Kube

    kube = Kube(kubeconfig)
    selector = Selector(configs_dir, output, default, node_label_key, log)
    if not once:
        # nothing to clean up (each write is atomic): a watch blocked in a read ends with the process
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        log(f"starting: node {node}, label {node_label_key}, configs in {configs_dir}, default {default!r}, "
            f"writing {output}")
    try:
        return run(kube, node, selector, resync, once)
    finally:
        kube.close()
