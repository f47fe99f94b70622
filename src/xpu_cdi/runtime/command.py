"""``xpu-cdi runtime``: the click commands (thin; the work is in ``configure``)."""

from __future__ import annotations

from typing import Optional, Tuple

import click

from .. import binaries
from . import configure as _configure
from . import ocihooks

_RESTART = {"containerd": "restart containerd (systemctl restart containerd) to apply",
            "crio": "restart CRI-O (systemctl restart crio) to apply",
            "docker": "restart dockerd (systemctl restart docker) to apply",
            "podman": "podman reads its config on every command: nothing to restart"}


@click.group("runtime")
def runtime() -> None:
    """Wire xpu-cdi into container runtimes (containerd, CRI-O, Docker, podman)."""


@runtime.command("configure")
@click.option("--runtime", "runtime_kind", required=True, type=click.Choice(_configure.RUNTIMES),
              help="The container runtime (engine) to configure.")
@click.option("--config", metavar="PATH", help="Its config file (default: the runtime's usual path; "
              "for CRI-O it is only read, to copy the runc handler's settings).")
@click.option("--drop-in", metavar="PATH", help="Write a drop-in file instead of editing --config in place "
              "(containerd: also adds it to 'imports'; CRI-O: default /etc/crio/crio.conf.d/99-xpu-cdi.conf).")
@click.option("--dry-run", is_flag=True, help="Print the diff, change nothing.")
@click.option("--enable-cdi", is_flag=True, help="Also turn on the runtime's own CDI support "
              "(containerd 1.7+ enable_cdi/cdi_spec_dirs, Docker features.cdi).")
@click.option("--runtime-name", default="xpu", show_default=True,
              help="Handler name: what a Kubernetes RuntimeClass names in 'handler'.")
@click.option("--set-as-default", is_flag=True, help="Make the handler the runtime's default.")
@click.option("--wrapper-path", default=None, metavar="PATH",
              help="Absolute path of xpu-container-runtime (default: the one installed with this xpu-cdi).")
@click.option("--cdi-spec-dir", "spec_dirs", multiple=True, metavar="DIR",
              help="CDI spec dir for cdi_spec_dirs (repeatable; default /etc/cdi and /var/run/cdi).")
@click.option("--oci-hook/--no-oci-hook", default=None,
              help="Install the oci-hooks.d file for xpu-cdi-hook (default: on for crio and podman).")
@click.option("--hook-path", default=None, metavar="PATH", help="Absolute path of xpu-cdi-hook for the hook file.")
@click.option("--hooks-dir", default=ocihooks.DEFAULT_HOOKS_DIR, show_default=True,
              help="Where the oci-hooks.d file goes.")
def configure(runtime_kind: str, config: Optional[str], drop_in: Optional[str], dry_run: bool, enable_cdi: bool,
              runtime_name: str, set_as_default: bool, wrapper_path: Optional[str], spec_dirs: Tuple[str, ...],
              oci_hook: Optional[bool], hook_path: Optional[str], hooks_dir: str) -> None:
    """Add the xpu runtime handler (xpu-container-runtime) and CDI settings
    to a runtime's config, keeping everything else.  Idempotent: a second
    run changes nothing."""
    opts = _configure.Options(
        runtime=runtime_kind, config=config, drop_in=drop_in, enable_cdi=enable_cdi, runtime_name=runtime_name,
        set_as_default=set_as_default,
        wrapper=wrapper_path or binaries.installed("xpu-container-runtime"),
        spec_dirs=spec_dirs or _configure.DEFAULT_SPEC_DIRS, oci_hook=oci_hook,
        hook_path=hook_path or binaries.installed("xpu-cdi-hook"), hooks_dir=hooks_dir)
    plan = _configure.plan(opts)
    for note in plan.notes:
        click.echo(f"xpu-cdi: note: {note}", err=True)
    if dry_run:
        text = _configure.diff(plan)
        click.echo(text if text else "no changes", nl=not text)
        return
    lines = _configure.apply(plan)
    for line in lines:
        click.echo(line)
    if any(line.startswith("wrote") for line in lines):
        click.echo(_RESTART[runtime_kind])
        if runtime_kind in ("containerd", "crio"):
            click.echo(f"Kubernetes: a RuntimeClass with handler: {runtime_name} (deploy/runtimeclass.yaml) "
                       f"selects it")


def command() -> click.Group:
    """The ``runtime`` click group (``cli`` loads it on first use)."""
    return runtime
