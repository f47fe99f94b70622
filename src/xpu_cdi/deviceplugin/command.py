"""The ``xpu-cdi device-plugin`` click command (built on first use, see ``cli.COMMANDS``).

``--probe`` (the DaemonSet's readiness probe) reads the status file only and
never imports gRPC; the plugin itself serves from this process, so ``ps``
shows the command line that started it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Dict, Optional, Tuple

import click

from ..clikit import LOG_OPTIONS, NODE_CONFIG_OPTION, SPEC_DIRS_OPTION, Seconds, daemon_log, read_from_env, subcommand
from ..log import WARNING
from ..node.status import probe as _probe
from ..node.uevents import SOURCES as UEVENT_SOURCES
from .. import remedy
from . import config, response

# flag -> Settings field, for the flags whose value comes as given strings
_FIELDS = {"plugin_dir": "plugin_dir", "spec_dirs": "spec_dirs", "dev_root": "dev_root",
           "driver_root": "driver_root", "sysfs_root": "sysfs_root", "proc_root": "proc_root",
           "profiles": "profiles", "profiles_dir": "profiles_dir", "status_file": "status_file",
           "health_interval": "health_interval", "removal_grace": "removal_grace", "uevents": "uevents",
           "resource_naming": "resource_naming", "node_config": "node_config", "node_name": "node_name",
           "kubeconfig": "kubeconfig", "pod_resources_socket": "pod_resources_socket"}


def _given(ctx: click.Context, params: Dict[str, Any]) -> Dict[str, Any]:
    """Settings from the flags that were given on the command line (defaults left to the config file)."""
    out: Dict[str, Any] = {}
    for name, fieldname in _FIELDS.items():
        src = ctx.get_parameter_source(name)
        if src is not None and src.name != "DEFAULT":
            value = params[name]
            out[fieldname] = tuple(value) if isinstance(value, (list, tuple)) else value
    out["resource_names"] = config.parse_flag("resource_names", params["resource_names"])
    out["strategies"] = config.parse_flag("strategies", params["strategies"])
    out["evict"] = remedy.parse(params["evict"]) if params["evict"] else None
    return {k: v for k, v in out.items() if v not in (None, ())}


def device_plugin(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
                  sysfs_root: str, plugin_dir: str, spec_dirs: Tuple[str, ...], proc_root: Optional[str],
                  resource_names: Tuple[str, ...], strategies: Tuple[str, ...], config_path: Optional[str],
                  status_file: str, health_interval: float, removal_grace: float, uevents: str,
                  resource_naming: str, node_config: str, evict: Tuple[str, ...], node_name: Optional[str],
                  kubeconfig: Optional[str], pod_resources_socket: str, probe: bool, log_level: str,
                  verbose: bool, log_format: str) -> None:
    """The kubelet device plugin: advertise the cards our CDI specs define,
    one resource per CDI kind, and answer Allocate with CDI device names.

    Serves on a socket in --plugin-dir first, then registers with kubelet
    (retrying with backoff), re-registers within a second when kubelet
    restarts, reports each card's health, re-reads the specs when they
    change. SIGHUP reloads; SIGTERM removes the sockets and exits 0.
    """
    ctx = click.get_current_context()
    params = dict(ctx.params)
    flags = _given(ctx, params)
    log = None if probe else daemon_log("xpu-cdi device-plugin", log_level, verbose, log_format)

    def warn(line: str) -> None:  # the probe, run every few seconds, says nothing of the file
        if log is not None:
            log(line, WARNING)

    settings = config.build(config_path, flags, warn)
    config.check_settings(settings)
    if probe:
        ok, why = _probe(settings.status_file)
        click.echo(("ready: " if ok else "not ready: ") + why, err=not ok)
        sys.exit(0 if ok else 1)
    try:
        from .daemon import Daemon
    except ImportError as err:
        raise config.ConfigError(f"the device plugin needs grpcio and protobuf ({err}): pip install 'xpu-cdi' "
                                 f"(they are dependencies) or apt install python3-grpcio python3-protobuf") from None

    def reload_settings() -> config.Settings:  # SIGHUP: the file read again, the flags and env given still win
        new = config.build(config_path, flags, warn)
        config.check_settings(new)
        return new

    assert log is not None
    sys.exit(Daemon(settings, log=log, reload_settings=reload_settings,
                    config_file=config_path or config.DEFAULT_CONFIG).run())

OPTIONS = (
    click.option("--plugin-dir", default=config.DEFAULT_PLUGIN_DIR, show_default=True,
                 help="kubelet's device-plugins directory (kubelet's socket is DIR/kubelet.sock)."),
    SPEC_DIRS_OPTION,
    click.option("--proc-root", default=None, help="proc is read from <root>/proc (default: --sysfs-root)."),
    click.option("--resource-name", "resource_names", multiple=True, metavar="KIND=NAME",
                 help="Resource name for a CDI kind (repeatable; default: the kind itself, e.g. kunlunxin.com/xpu). "
                      "Example: huawei.com/npu=huawei.com/Ascend910."),
    click.option("--resource-naming", type=click.Choice(config.naming.NAMINGS), default=config.naming.KIND,
                 show_default=True,
                 help="'model': one resource per card model as the vendor's plugin names it (huawei.com/Ascend310P, "
                      "huawei.com/Ascend910); 'kind': one per CDI kind (huawei.com/npu)."),
    click.option("--device-list-strategy", "strategies", multiple=True, metavar="LIST",
                 help=f"How Allocate names the cards: {', '.join(response.STRATEGIES)} (comma-separated or "
                      f"repeatable; default {','.join(response.DEFAULT_STRATEGIES)}). envvar only when asked: "
                      f"any pod can set the same variable itself."),
    click.option("--config", "config_path", default=None, metavar="FILE",
                 help=f"Settings file (YAML in NVIDIA's shape: version: v1, flags: {{pluginDir: ...}}, sharing:; "
                      f"default {config.DEFAULT_CONFIG} if present). Flags and XPU_CDI_* variables win."),
    click.option("--status-file", default=config.DEFAULT_STATUS_FILE, show_default=True,
                 help="Where the plugin writes its state (read by --probe and doctor)."),
    click.option("--health-interval", type=Seconds(*config.HEALTH_INTERVAL_RANGE),
                 default=config.Settings.health_interval, show_default=True,
                 help="Seconds between health polls, the safety net under the events (uevents and inotify "
                      "trigger checks at once)."),
    click.option("--removal-grace", type=Seconds(*config.REMOVAL_GRACE_RANGE), default=300.0, show_default=True,
                 help="Seconds a card no spec defines any more stays listed, Unhealthy, before it is dropped "
                      "(a driver reload removes the spec for a while; the cards must not leave kubelet)."),
    click.option("--uevents", type=click.Choice(UEVENT_SOURCES), default="auto", show_default=True,
                 help="uevent source for health checks; 'none': inotify and the poll only."),
    NODE_CONFIG_OPTION,
    click.option("--evict", multiple=True, metavar="KIND[:grace=S][,hold-down=S]",
                 help="Evict the pods holding a card of KIND unhealthy for the grace (default 30 s), through the "
                      "Eviction API (PodDisruptionBudgets hold); a card that recovered is offered again after the "
                      "hold-down (default 300 s). Repeatable; default: no kind (evict nothing, as before). Needs "
                      "the remediation RBAC (docs/device-plugin.md, Remediation)."),
    click.option("--node-name", default=None,
                 help="kubelet's node name, whose pods --evict may evict (default: $NODE_NAME, else the host name)."),
    click.option("--kubeconfig", default=None, metavar="FILE",
                 help="The API server for --evict (default: the pod's service account)."),
    click.option("--pod-resources-socket", default=config.DEFAULT_POD_RESOURCES, show_default=True,
                 help="kubelet's PodResources socket: which pods hold an unhealthy card (--evict)."),
    click.option("--probe", is_flag=True,
                 help="Exit 0 if a running plugin has registered every kind it serves, else 1 with the reason "
                      "(a readiness probe)."),
    *LOG_OPTIONS,
)


def command() -> click.Command:
    """Built by ``clikit.subcommand`` (root options: --profile, --profiles-dir, --dev-root, ...)."""
    return subcommand("device-plugin", device_plugin, OPTIONS, envvars=True)


def device_plugin_config(node: Optional[str], kubeconfig: Optional[str], node_label: str, configs_dir: str,
                         default_config: str, output: str, resync: float, once: bool, log_level: str,
                         verbose: bool, log_format: str) -> None:
    """Write the device plugin's config file that this node's label names (NVIDIA's
    config-manager, in our names: docs/device-plugin.md, "A config per node").

    The label (default xpu-cdi.io/device-plugin-config) names a file of --configs-dir; no
    label: --default-config. The file is checked as the plugin reads it and written to
    --output atomically; the plugin follows it. An unknown name or a bad file is one warning
    line and the config in place stays. Reads its own Node only (list and watch with a field
    selector); --once: one pass, as an init container.
    """
    from . import configselect

    log = daemon_log("xpu-cdi device-plugin-config", log_level, verbose, log_format)
    sys.exit(configselect.main(node, kubeconfig, node_label, configs_dir, default_config, output, resync, once, log))


@functools.lru_cache(maxsize=None)  # click.option mutates the function: built once
def config_command() -> click.Command:
    """``device-plugin-config``: the config-manager sidecar (no host options: it reads no host)."""
    from . import configselect

    f: Any = device_plugin_config
    for opt in reversed((
        click.option("--node", default=None, envvar="NODE_NAME", metavar="NAME",
                     help="The Node whose label picks the config (default: $NODE_NAME, the downward API's "
                          "spec.nodeName)."),
        click.option("--kubeconfig", default=None, metavar="FILE",
                     help="The API server as this kubeconfig says (default: the pod's service account)."),
        click.option("--node-label", default=configselect.DEFAULT_LABEL, show_default=True, metavar="KEY",
                     help="The node label naming the config."),
        click.option("--configs-dir", default=configselect.DEFAULT_CONFIGS_DIR, show_default=True, metavar="DIR",
                     help="The named configs, a file each (a mounted ConfigMap)."),
        click.option("--default-config", default=configselect.DEFAULT_NAME, show_default=True, metavar="NAME",
                     help="The config of a node without the label."),
        click.option("--output", default=config.DEFAULT_CONFIG, show_default=True, metavar="FILE",
                     help="The file written: the device plugin's --config."),
        click.option("--resync", type=Seconds(1, 86400), default=60.0, show_default=True,
                     help="Seconds a watch of the Node lasts before it is listed again (the configs "
                          "directory is read again then too)."),
        click.option("--once", is_flag=True, help="One pass, then exit (an init container)."),
        *LOG_OPTIONS,
    )):
        f = opt(f)
    cmd = click.command("device-plugin-config")(f)
    read_from_env(cmd)
    return cmd
