"""The ``xpu-cdi exporter`` click command (built on first use, see ``cli.LAZY_COMMANDS``)."""

from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

import click

from ..clikit import LOG_OPTIONS, SPEC_DIRS_OPTION, Seconds, daemon_log, subcommand
from ..errors import ConfigError


def exporter(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
             sysfs_root: str, listen: str, interval: float, pod_resources_socket: str, spec_dirs: Tuple[str, ...],
             proc_root: Optional[str], status_file: str, dra_plugins_dir: str, boot_id_file: str,
             web_config_file: Optional[str], once: bool, log_level: str, verbose: bool, log_format: str) -> None:
    """Per-card metrics for Prometheus: every card the CDI specs define, its
    health, memory, utilisation, temperature and power, and the pod holding it.

    Readings come from the sources each profile's `metrics:` section names
    (the vendor's tool, run once for all cards, or per-card files); the
    holders from kubelet's PodResources API. A scrape of a snapshot older
    than --interval runs a pass; unscraped, the exporter runs no tool. Serves /metrics
    (Prometheus text, or OpenMetrics when the scraper asks) and /healthz;
    over TLS, with client certificates or basic auth, as --web-config-file
    says (the format of node_exporter's --web.config.file). SIGHUP re-reads
    that file (a change is also picked up within a second); SIGTERM exits 0.
    """
    try:
        from .daemon import Exporter, Settings, parse_listen
    except ImportError as err:
        raise ConfigError(f"the exporter needs grpcio, protobuf and prometheus_client ({err}): pip install 'xpu-cdi' "
                          f"(they are dependencies) or apt install python3-grpcio python3-protobuf "
                          f"python3-prometheus-client") from None
    from . import webconfig

    try:
        parse_listen(listen)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    web_config = os.path.abspath(web_config_file) if web_config_file else ""
    if web_config:
        webconfig.load(web_config)  # a bad file: one line and a non-zero exit here, before serving
    settings = Settings(listen=listen, interval=interval, pod_resources_socket=os.path.abspath(pod_resources_socket),
                        spec_dirs=tuple(os.path.abspath(d) for d in spec_dirs), dev_root=os.path.abspath(dev_root),
                        driver_root=os.path.abspath(driver_root), sysfs_root=os.path.abspath(sysfs_root),
                        proc_root=os.path.abspath(proc_root) if proc_root else None, profiles=profiles,
                        profiles_dir=profiles_dir, status_file=os.path.abspath(status_file),
                        dra_plugins_dir=os.path.abspath(dra_plugins_dir), boot_id_file=boot_id_file,
                        web_config_file=web_config)
    exp = Exporter(settings, log=daemon_log("xpu-cdi exporter", log_level, verbose, log_format))
    if once:  # one refresh, the scrape on stdout: what Prometheus would read now
        exp.step()
        sys.stdout.buffer.write(exp.scrape())
        return
    sys.exit(exp.run())


OPTIONS = (
    click.option("--listen", default=":28470", show_default=True, metavar="ADDR:PORT",
                 help="Where /metrics is served (':PORT' = every address). 28470 is outside the Prometheus "
                      "exporters' allocated 9100-9999 range and clear of dcgm-exporter, node-exporter and "
                      "npu-exporter."),
    click.option("--interval", type=Seconds(1, 3600), default=10.0, show_default=True,
                 help="The longest a snapshot serves scrapes: a scrape of an older one runs a pass (each vendor tool "
                      "once for all cards, kubelet asked once)."),
    click.option("--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock", show_default=True,
                 help="kubelet's PodResources API socket (<kubelet root>/pod-resources/kubelet.sock)."),
    SPEC_DIRS_OPTION,
    click.option("--proc-root", default=None, help="proc is read from <root>/proc (default: --sysfs-root)."),
    click.option("--status-file", default="/run/xpu-cdi/exporter.json", show_default=True,
                 help="Where the exporter writes its sources' state (read by doctor)."),
    click.option("--dra-plugins-dir", default="/var/lib/kubelet/plugins", show_default=True,
                 help="kubelet's plugins dir: the DRA drivers' checkpoints (<dir>/<driver>/checkpoint.json) name "
                      "the shares and vNPUs claims hold."),
    # the boot the DRA driver's checkpoint is keyed to; a test's stand-in for a reboot (not in --help)
    click.option("--boot-id-file", default="/proc/sys/kernel/random/boot_id", hidden=True),
    click.option("--web-config-file", default=None, metavar="FILE",
                 help="TLS, client certificates and basic auth for /metrics, in the Prometheus exporter-toolkit "
                      "format (node_exporter's --web.config.file): tls_server_config, http_server_config.headers, "
                      "basic_auth_users (bcrypt). Default: plain HTTP, no auth."),
    click.option("--once", is_flag=True, help="Refresh once, print the scrape on stdout and exit."),
    *LOG_OPTIONS,
)


def command() -> click.Command:
    """Built by ``clikit.subcommand`` (root options: --profile, --profiles-dir, --dev-root, ...)."""
    return subcommand("exporter", exporter, OPTIONS, envvars=True)
