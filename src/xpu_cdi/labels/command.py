"""``xpu-cdi labels``: the node's labels, printed, written as an NFD feature file, or set on the Node."""

from __future__ import annotations

import sys
from typing import Optional, Tuple

import click

from ..clikit import LOG_OPTIONS, Seconds, daemon_log, echo_labels, subcommand
from ..node import uevents
from . import nfd


def run(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
        sysfs_root: str, proc_root: Optional[str], nfd_file: Optional[str], node: Optional[str],
        kubeconfig: Optional[str], daemon: bool, interval: float, resync: float, expiry: float,
        removal_grace: float, uevents: str, as_json: bool, log_level: str, verbose: bool,
        log_format: str) -> None:
    """Label the node with what its accelerators are: per kind present, count, model,
    memory, driver version and the PCIe topology groups (docs/topology.md, "Node labels").

    Without --nfd-file or --node the labels are printed. --daemon keeps them current:
    card and driver changes show within seconds, labels of ours no longer true are
    removed, labels outside xpu-cdi.io/ are never touched.
    """
    from .daemon import Labeller, Settings

    s = Settings(profiles=profiles, profiles_dir=profiles_dir, dev_root=dev_root, driver_root=driver_root,
                 sysfs_root=sysfs_root, proc_root=proc_root, nfd_file=nfd_file, node=node, kubeconfig=kubeconfig,
                 interval=interval, resync=resync, expiry=expiry, removal_grace=removal_grace, uevents=uevents)
    kube = None
    if node:
        from ..kube.client import Kube

        kube = Kube(kubeconfig)
    labeller = Labeller(s, log=daemon_log("xpu-cdi labels", log_level, verbose, log_format), kube=kube)
    if not nfd_file and not node:
        echo_labels(labeller.wanted(), as_json)
        return
    sys.exit(labeller.run(once=not daemon))


OPTIONS = (
    click.option("--proc-root", default=None, help="proc is read from <root>/proc (default: --sysfs-root)."),
    click.option("--nfd-file", default=None, metavar="FILE",
                 help=f"Write the labels as a node-feature-discovery feature file (e.g. {nfd.DEFAULT_FILE})."),
    click.option("--node", default=None, envvar="NODE_NAME", metavar="NAME",
                 help="Set the labels on this Node through the API server (default: $NODE_NAME when set)."),
    click.option("--kubeconfig", default=None, metavar="FILE",
                 help="With --node: the API server as this kubeconfig says (default: the pod's service account)."),
    click.option("--daemon", is_flag=True, help="Keep the labels current until SIGTERM."),
    click.option("--interval", type=Seconds(0.1, 3600), default=5.0, show_default=True,
                 help="Seconds between passes at most (inotify and uevents start one at once)."),
    click.option("--resync", type=Seconds(1, 86400), default=60.0, show_default=True,
                 help="Seconds between reads of the Node when nothing changed (labels of ours put back)."),
    click.option("--expiry", type=Seconds(60, 30 * 86400), default=nfd.DEFAULT_EXPIRY, show_default=True,
                 help="Seconds the feature file stays valid for NFD (re-written before half of it is over)."),
    click.option("--removal-grace", type=Seconds(0, 86400), default=300.0, show_default=True,
                 help="Seconds the labels of a kind whose cards all went stay (a driver reload)."),
    click.option("--uevents", type=click.Choice(uevents.SOURCES), default="auto",
                 show_default=True, help="uevent source; 'none': inotify and the interval only."),
    click.option("--json", "as_json", is_flag=True, help="Print the labels as a JSON object."),
    *LOG_OPTIONS,
)


def command() -> click.Command:
    """The ``labels`` click command (``cli`` builds it on first use)."""
    return subcommand("labels", run, OPTIONS, envvars=True)
