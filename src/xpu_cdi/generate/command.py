"""``xpu-cdi generate``: the generate flow from the command line.

It reads top to bottom: ``options.plan`` (profile.select -> discover.discover_all)
-> ``spec.build`` -> ``spec.write`` (or ``--check`` against the file on disk).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional, Tuple

import click

from .. import clikit, errors
from . import check as _check
from . import options as _options
from . import spec as _spec


def run(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
        sysfs_root: str, output: Optional[str], spec_dir: str, fmt: Optional[str], vendor: Optional[str],
        device_class: Optional[str], check: bool, with_topology: bool, strategies: Tuple[str, ...],
        no_all_device: bool, hook_path: Optional[str], ld_library_path_env: bool) -> None:
    """Find the cards on this host and write a CDI spec per kind.

    The spec uses the lowest cdiVersion its content needs (0.5.0 by
    default), so podman 4.3 and containerd 1.7.0 load it.
    """
    opts = _options.spec_options(strategies, no_all_device, hook_path, ld_library_path_env, vendor, device_class)
    found = _options.plan(profiles, profiles_dir, _options.roots_of(dev_root, driver_root, sysfs_root))
    for _name, failure in found.failures:
        click.echo(f"xpu-cdi: skipped: {failure}", err=True)
    views = found.views
    if output and len(views) > 1:
        kinds = ", ".join(v.profile.kind for v in views)
        raise errors.SpecError(f"--output takes one kind but cards of several were found ({kinds}): "
                               f"choose one with --profile, or use --spec-dir")
    stale = 0
    for view in views:
        for note in view.notes:
            click.echo(f"xpu-cdi: note: {note}", err=True)
        if with_topology:
            from . import withtopology  # sysfs PCIe walks: only for --with-topology

            spec = _spec.build(view, withtopology.spec_options(view, opts, os.path.abspath(sysfs_root)))
        else:
            spec = _spec.build(view, opts)
        summary = (f"{spec['kind']}: {len(view.cards)} card(s) "
                   f"[{','.join(str(c.index) for c in view.cards)}], cdiVersion {spec['cdiVersion']}")
        path = output or os.path.join(spec_dir, _spec.file_name(spec["kind"], fmt or "json"))
        if check:
            stale += _report_check(path, spec)
            continue
        if output == "-":
            sys.stdout.buffer.write(_spec.dumps(spec, fmt or "json"))
            click.echo(f"xpu-cdi: {summary}", err=True)
            continue
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o755, exist_ok=True)
        _spec.write(path, spec, _spec.format_of(path, fmt), _spec.hook_index(view, spec, opts))
        click.echo(f"wrote {path}: {summary}")
    if stale:
        sys.exit(1)
    if found.failures:  # the specs of the others are written; the status still says one failed
        sys.exit(clikit.PROFILE_FAILED)


def _report_check(path: str, spec: Any) -> int:
    """Print whether *path* is up to date; 1 when it is not."""
    diffs = _check.differences(_check.read(path), spec)
    if not diffs:
        click.echo(f"{path}: up to date")
        return 0
    click.echo(f"{path}: stale: {'; '.join(diffs)} (run `xpu-cdi generate` to refresh)")
    return 1


OPTIONS = (
    click.option("--output", "-o", metavar="FILE|-", help="Write to FILE, or '-' for stdout (one kind only)."),
    click.option("--spec-dir", default="/etc/cdi", show_default=True,
                 help="Directory for <vendor>-<class>.<format> files when --output is not given."),
    click.option("--format", "fmt", type=click.Choice(["json", "yaml"]),
                 help="Output format; default from --output's extension, else json (the hook reads JSON fastest)."),
    click.option("--vendor", help="Override the CDI vendor of the kind."),
    click.option("--class", "device_class", help="Override the CDI class of the kind."),
    click.option("--check", is_flag=True,
                 help="Write nothing; exit 0 if the spec on disk matches what would be generated now, else 1 "
                      "with a summary of the difference."),
    click.option("--with-topology", is_flag=True,
                 help="Annotate each card with its PCI address, NUMA node, PCIe switch and root port "
                      "(xpu-cdi.io/pci, ...). Annotations raise the spec's cdiVersion to 0.6.0, which podman 4.3, "
                      "containerd before 1.7.12 and CRI-O before 1.28 ignore."),
) + _options.SPEC_OPTIONS


def command() -> click.Command:
    """The ``generate`` click command (``cli`` builds it on first use)."""
    return clikit.subcommand("generate", run, OPTIONS)
