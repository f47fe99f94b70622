"""``xpu-cdi host``: the click commands of the DaemonSet's host set-up (thin; the
work is in :mod:`.install` and :mod:`.wiring`)."""

from __future__ import annotations

from typing import Any, Optional, Tuple


def command() -> Any:
    """The ``host`` click group (built on first use, as the other lazy commands)."""
    import click

    from ..clikit import Seconds
    from . import install as _install
    from . import wiring as _wiring

    @click.group("host")
    def host() -> None:
        """Set up a host that has no xpu-cdi package (the DaemonSet's init containers)."""

    @host.command("install-binaries")
    @click.option("--from", "source", default=_install.IMAGE_DIR, show_default=True, metavar="DIR",
                  help="Where the statically linked xpu-cdi-hook and xpu-container-runtime are.")
    @click.option("--to", "dest", default=_install.DEFAULT_DIR, show_default=True, metavar="DIR",
                  help="Host directory to install them into (it and its parents must be root's, "
                       "writable by no one else).")
    def install_binaries(source: str, dest: str) -> None:
        """Install the hook and the wrapper into DIR, each replaced atomically and only when it
        changed (a container start running the old one is not disturbed)."""
        for r in _install.install(source, dest):
            click.echo(f"{'installed' if r.changed else 'up to date'} {r.path}")

    @host.command("wire-runtime")
    @click.option("--node-config", default=_wiring.nodeconfig.DEFAULT_PATH, show_default=True, metavar="FILE",
                  help="The node config whose configure-containerd / restart-containerd decide.")
    @click.option("--fallback-config", metavar="FILE",
                  help="Read this node config instead when --node-config does not exist (the DaemonSet's ConfigMap).")
    @click.option("--containerd-config", "config", default=_wiring.DEFAULT_CONFIG, show_default=True,
                  metavar="FILE", help="containerd's main config (the one its --config names).")
    @click.option("--drop-in", default=_wiring.DEFAULT_DROP_IN, show_default=True, metavar="FILE",
                  help="The drop-in written (and added to the main config's imports).")
    @click.option("--socket", default=_wiring.DEFAULT_SOCKET, show_default=True, metavar="PATH",
                  help="containerd's socket: its version is asked there, and its return after the restart.")
    @click.option("--wrapper-path", default="/usr/local/xpu-cdi/bin/xpu-container-runtime", show_default=True,
                  help="The host path of xpu-container-runtime for the xpu handler.")
    @click.option("--hook-path", default="/usr/local/xpu-cdi/bin/xpu-cdi-hook", show_default=True,
                  help="The host path of xpu-cdi-hook.")
    @click.option("--cdi-spec-dir", "spec_dirs", multiple=True, metavar="DIR",
                  help="A spec dir containerd must read, added to the cdi_spec_dirs it has (repeatable; "
                       "default /var/run/cdi, where the DaemonSet writes).")
    @click.option("--timeout", type=Seconds(0, 3600), default=60.0, show_default=True,
                  help="Seconds to wait for containerd to come back after the restart.")
    def wire_runtime(node_config: str, fallback_config: Optional[str], config: str, drop_in: str, socket: str,
                     wrapper_path: str, hook_path: str, spec_dirs: Tuple[str, ...], timeout: float) -> None:
        """Configure the host's containerd for xpu-cdi (CDI on, the xpu handler) and restart it, when
        the node config says configure-containerd: true (off by default).  Running containers keep
        running; containerd must be supervised (systemd restarts it)."""
        _wiring.wire(_wiring.Options(node_config=node_config, fallback_config=fallback_config, config=config,
                                     drop_in=drop_in, socket=socket,
                                     wrapper=wrapper_path, hook=hook_path,
                                     spec_dirs=spec_dirs or ("/var/run/cdi",), timeout=timeout),
                     say=click.echo)

    return host
