"""The ``xpu-cdi dra-driver`` click command (built on first use, see ``cli.LAZY_COMMANDS``).

``--probe`` (the DaemonSet's readiness probe) reads the status file only:
no gRPC, no Kubernetes client.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import sys
from typing import Optional, Tuple

import click

from .. import bounded, remedy
from ..clikit import LOG_OPTIONS, NODE_CONFIG_OPTION, SPEC_DIRS_OPTION, Seconds, daemon_log, subcommand
from ..errors import ConfigError
from ..kube import node as kube_node
from ..node.settings import HEALTH_INTERVAL_RANGE
from . import config, shares


def probe(settings: config.Settings) -> Tuple[bool, str]:
    """Ready when a running driver has registered and published every kind it serves."""
    try:
        doc = bounded.read_json(settings.status_file, 1 << 20)
    except (OSError, ValueError) as err:
        return False, f"no readable status file {settings.status_file} ({err})"
    kinds = doc.get("kinds") or {}
    if not kinds:
        return False, "serving no kind yet (no spec defines cards, or every kind was refused: see the log)"
    for kind, k in sorted(kinds.items()):
        if not k.get("registered"):
            return False, f"{kind}: not registered with kubelet {k.get('registration_error') or '(yet)'}"
        if not k.get("published"):
            return False, f"{kind}: slices not published: {k.get('publish_error') or '(yet)'}"
    return True, ", ".join(f"{kind}: {len(k.get('devices') or {})} device(s)" for kind, k in sorted(kinds.items()))


def dra_driver(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
               sysfs_root: str, node_name: Optional[str], kubeconfig: Optional[str], registry_dir: str,
               plugins_dir: str, run_dir: str, pod_uid: Optional[str], spec_dirs: Tuple[str, ...],
               proc_root: Optional[str], driver_names: Tuple[str, ...], node_config: str, health_interval: float,
               no_health_service: bool, probe_only: bool, boot_id_file: str, vnpu_tool: str,
               share_capacity: Tuple[str, ...], config_path: Optional[str], evict: Tuple[str, ...], log_level: str,
               verbose: bool, log_format: str) -> None:
    """The DRA driver (resource.k8s.io/v1): publish the cards our CDI specs
    define as ResourceSlices of this node, one driver per CDI kind, and
    prepare the claims kubelet hands it with the specs' CDI device names.

    Serves kubelet's DRAPlugin (v1, v1beta1) and DRAResourceHealth, registers
    through the plugin watcher, taints unhealthy cards (NoExecute after a
    grace where --evict says so), keeps a boot-keyed checkpoint of prepared
    claims. SIGTERM unregisters, withdraws the slices and exits 0.
    """
    uid = pod_uid if pod_uid is not None else os.environ.get("POD_UID", "")
    settings = config.Settings(
        node_name=kube_node.node_name(node_name), kubeconfig=kubeconfig, registry_dir=os.path.abspath(registry_dir),
        plugins_dir=os.path.abspath(plugins_dir), run_dir=os.path.abspath(run_dir), pod_uid=uid,
        spec_dirs=tuple(os.path.abspath(d) for d in spec_dirs), dev_root=os.path.abspath(dev_root),
        driver_root=os.path.abspath(driver_root), sysfs_root=os.path.abspath(sysfs_root),
        proc_root=os.path.abspath(proc_root) if proc_root else None, profiles=tuple(profiles),
        profiles_dir=tuple(profiles_dir), driver_names=config.parse_driver_names(driver_names),
        node_config=node_config, health_interval=health_interval, health_service=not no_health_service,
        boot_id_file=boot_id_file, vnpu_tool=os.path.abspath(vnpu_tool) if vnpu_tool else "",
        shares=shares.parse(share_capacity),
        remedy={**config.read_config(config_path or config.CONFIG_FILE, config_path is not None),
                **remedy.parse(evict)})
    config.check(settings)
    if probe_only:
        if not uid:  # without a pod uid the file is named after the pid: any running driver's will do
            found = sorted(glob.glob(os.path.join(settings.run_dir, "dra-driver-*.json")))
            if found:
                settings = dataclasses.replace(settings, pod_uid=os.path.basename(found[-1])[len("dra-driver-"):-5])
        ok, why = probe(settings)
        click.echo(("ready: " if ok else "not ready: ") + why, err=not ok)
        sys.exit(0 if ok else 1)
    try:
        from .daemon import Daemon
    except ImportError as err:
        raise ConfigError(f"the DRA driver needs grpcio, protobuf and the Kubernetes client ({err}): pip install "
                          f"'xpu-cdi', or apt install python3-grpcio python3-protobuf python3-kubernetes") from None
    sys.exit(Daemon(settings, log=daemon_log("xpu-cdi dra-driver", log_level, verbose, log_format)).run())

OPTIONS = (
    click.option("--node-name", default=None, help="kubelet's node name (default: $NODE_NAME, else the host name)."),
    click.option("--kubeconfig", default=None, metavar="FILE",
                 help="Talk to the API server as this kubeconfig says (default: the pod's service account, "
                      "else $KUBECONFIG or ~/.kube/config)."),
    click.option("--registry-dir", default=config.REGISTRY_DIR, show_default=True,
                 help="kubelet's plugin watcher directory (registration sockets)."),
    click.option("--plugins-dir", default=config.PLUGINS_DIR, show_default=True,
                 help="Where each driver's directory is made (its DRA socket and checkpoint.json)."),
    click.option("--run-dir", default=config.RUN_DIR, show_default=True,
                 help="The host's /run/xpu-cdi: status file, and the locks that keep one way per kind."),
    click.option("--pod-uid", default=None,
                 help="This pod's uid (default: $POD_UID): names the sockets, so the two pods of a rolling "
                      "update both serve."),
    SPEC_DIRS_OPTION,
    click.option("--proc-root", default=None, help="proc is read from <root>/proc (default: --sysfs-root)."),
    click.option("--driver-name", "driver_names", multiple=True, metavar="KIND=NAME",
                 help="Driver name of a CDI kind (repeatable; default: the CDI vendor, kunlunxin.com)."),
    NODE_CONFIG_OPTION,
    click.option("--health-interval", type=Seconds(*HEALTH_INTERVAL_RANGE), default=config.Settings.health_interval,
                 show_default=True,
                 help="Seconds between health polls, the safety net under the events (inotify triggers checks "
                      "at once)."),
    click.option("--no-health-service", is_flag=True,
                 help="Do not offer kubelet the DRAResourceHealth stream (taints still mark unhealthy cards)."),
    click.option("--share-capacity", "share_capacity", multiple=True,
                 metavar="KIND:default=Q[,step=Q][,min=Q][,max=Q][,memory=Q]",
                 help="Share each card of KIND between claims by its memory (DRA consumable capacity): default is "
                      "what a claim asking for none takes, step/min/max the valid range, memory the card's where "
                      "the profile does not know it. Repeatable, one per kind. Nothing enforces a share unless the "
                      "vendor's runtime does (docs/sharing.md)."),
    click.option("--probe", "probe_only", is_flag=True,
                 help="Exit 0 if a running driver has registered and published every kind it serves, else 1."),
    click.option("--vnpu-tool", default="", metavar="PATH",
                 help="The vendor's partitioning tool (Ascend: npu-smi), run to make and destroy vNPUs for claims "
                      "(default: the profile's partition data names it, in <driver root>/usr/local/bin)."),
    click.option("--config", "config_path", default=None, metavar="FILE",
                 help=f"Settings file (YAML: version: v1, remediation: {{KIND: {{grace: 30, holdDown: 300}}}}; "
                      f"default {config.CONFIG_FILE} if present). --evict wins for the kinds it names."),
    click.option("--evict", multiple=True, metavar="KIND[:grace=S][,hold-down=S]",
                 help="Remediation of KIND's unhealthy cards (repeatable, one per kind): after GRACE seconds "
                      f"unhealthy (default {remedy.Policy.grace:g}) the card's taint becomes NoExecute and "
                      "Kubernetes evicts the pods whose claims do not tolerate it; a card that recovers is "
                      f"offered again after HOLD-DOWN seconds of health (default {remedy.Policy.hold_down:g}). "
                      "Without it: a NoSchedule taint only, nothing evicted."),
    # the boot the checkpoint is keyed to; a test's stand-in for a reboot (not in --help)
    click.option("--boot-id-file", default=config.BOOT_ID_FILE, hidden=True),
    *LOG_OPTIONS,
)


def command() -> click.Command:
    """Built by ``clikit.subcommand`` (root options: --profile, --profiles-dir, --dev-root, ...)."""
    return subcommand("dra-driver", dra_driver, OPTIONS, envvars=True)
