"""The ``xpu-cdi`` command line: thin click wrappers over the library.

The generate pipeline reads top to bottom in :func:`generate`:
``profile.select -> discover.discover_all -> spec.build -> spec.write``.
Errors are mapped to exit codes in one place, :data:`clikit.EXIT_CODES`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, List, Optional, Sequence, Tuple

import click

from . import binaries, clikit, errors
from .cdi import registry
from .generate import check as _check
from .generate import discover as _discover
from .generate import edits as _edits
from .generate import profile as _profile
from .generate import spec as _spec
from .clikit import PROFILE_FAILED, default_hook_path, plan, root_options, roots_of

class Group(clikit.Group):
    """The top-level group: imports the subsystem commands of
    :data:`LAZY_COMMANDS` on first use (they import ``clikit``, never this module)."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name not in self.commands and name in LAZY_COMMANDS:
            module, attr, build = LAZY_COMMANDS[name]
            obj = getattr(importlib.import_module(module), attr)
            self.add_command(obj() if build else obj, name)
        return super().get_command(ctx, name)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xpu-cdi", prog_name="xpu-cdi")
def main() -> None:
    """CDI specs, an OCI hook and runtime wiring for AI accelerators
    (Kunlunxin XPU, Huawei Ascend NPU and more)."""


@main.command()
@root_options
@click.option("--device-name-strategy", "strategies", multiple=True, type=click.Choice(_spec.STRATEGIES),
              help="How devices are named: 'index' (0, 1, ...; default) and/or 'pci' (0000:3b:00.0). Repeatable.")
@click.option("--no-all-device", is_flag=True, help="Do not add the 'all' device.")
@click.option("--output", "-o", metavar="FILE|-", help="Write to FILE, or '-' for stdout (one kind only).")
@click.option("--spec-dir", default="/etc/cdi", show_default=True,
              help="Directory for <vendor>-<class>.<format> files when --output is not given.")
@click.option("--format", "fmt", type=click.Choice(["json", "yaml"]),
              help="Output format; default from --output's extension, else json (the hook reads JSON fastest).")
@click.option("--vendor", help="Override the CDI vendor of the kind.")
@click.option("--class", "device_class", help="Override the CDI class of the kind.")
@click.option("--hook-path", default=None, help="Absolute path of xpu-cdi-hook written into spec hooks.")
@click.option("--ld-library-path-env", is_flag=True,
              help="Set LD_LIBRARY_PATH instead of adding the update-ldcache hook (replaces the image's own value).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 0 if the spec on disk matches what would be generated now, else 1 "
                   "with a summary of the difference.")
@click.option("--with-topology", is_flag=True,
              help="Annotate each card with its PCI address, NUMA node, PCIe switch and root port "
                   "(xpu-cdi.io/pci, ...). Annotations raise the spec's cdiVersion to 0.6.0, which podman 4.3, "
                   "containerd before 1.7.12 and CRI-O before 1.28 ignore.")
def generate(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
             sysfs_root: str, strategies: Tuple[str, ...], no_all_device: bool, output: Optional[str],
             spec_dir: str, fmt: Optional[str], vendor: Optional[str], device_class: Optional[str],
             hook_path: Optional[str], ld_library_path_env: bool, check: bool,
             with_topology: bool) -> None:
    """Find the cards on this host and write a CDI spec per kind.

    The spec uses the lowest cdiVersion its content needs (0.5.0 by
    default), so podman 4.3 and containerd 1.7.0 load it.
    """
    hook = hook_path or default_hook_path()
    if not os.path.isabs(hook):
        raise errors.SpecError(f"--hook-path {hook!r} must be absolute: runtimes do not search PATH for hooks")
    opts = _spec.SpecOptions(edit=_edits.EditOptions(hook_path=hook, ld_library_path_env=ld_library_path_env),
                             name_strategies=strategies or ("index",), all_device=not no_all_device,
                             vendor=vendor, device_class=device_class)
    found = plan(profiles, profiles_dir, roots_of(dev_root, driver_root, sysfs_root))
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
            from . import topology as _topology

            spec = _spec.build(view, _topology.spec_options(view, opts, os.path.abspath(sysfs_root)))
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
        sys.exit(PROFILE_FAILED)


def _report_check(path: str, spec: Any) -> int:
    """Print whether *path* is up to date; 1 when it is not."""
    diffs = _check.differences(_check.read(path), spec)
    if not diffs:
        click.echo(f"{path}: up to date")
        return 0
    click.echo(f"{path}: stale: {'; '.join(diffs)} (run `xpu-cdi generate` to refresh)")
    return 1


@main.command("list")
@click.option("--spec-dir", "spec_dirs", multiple=True, default=registry.DEFAULT_DIRS, show_default=True,
              help="Spec directory, lowest priority first (repeatable).")
def list_devices(spec_dirs: Tuple[str, ...]) -> None:
    """Print the qualified CDI devices the spec directories define."""
    reg = registry.load(spec_dirs)
    for problem in reg.problems:
        click.echo(f"xpu-cdi: warning: {problem}", err=True)
    for name in sorted(reg.devices):
        click.echo(name)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(files: Tuple[str, ...]) -> None:
    """Check spec files against our strict schema and the CDI library's rules."""
    from .cdi import validate as cdi_validate  # jsonschema: only this command pays for it

    bad = 0
    for path in files:
        try:
            spec = cdi_validate.load_file(path)
        except OSError as err:
            click.echo(f"{path}: cannot read: {err.strerror}")
            bad += 1
            continue
        except Exception as err:  # noqa: BLE001 - json/yaml parse errors of any kind
            click.echo(f"{path}: cannot parse: {' '.join(str(err).split())}")
            bad += 1
            continue
        found = cdi_validate.problems(spec)
        for p in found:
            click.echo(f"{path}: {p}")
        if not found:
            click.echo(f"{path}: ok ({spec['kind']}, cdiVersion {spec['cdiVersion']}, "
                       f"{len(spec['devices'])} devices)")
        bad += bool(found)
    if bad:
        sys.exit(1)


@main.command(add_help_option=False, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook(args: Tuple[str, ...]) -> None:
    """Run the OCI hook (execs the compiled xpu-cdi-hook): prestart, update-ldcache, create-symlinks."""
    binaries.exec_binary("xpu-cdi-hook", list(args))


# Commands that live with their subsystem, imported only when used: `generate`
# on every driver update should not pay for tomlkit, pyudev or the doctor.
# name -> (module, attribute, whether the attribute builds the command)
LAZY_COMMANDS = {
    "runtime": ("xpu_cdi.runtime.cli", "runtime", False),
    "watch": ("xpu_cdi.watch", "command", True),
    "topology": ("xpu_cdi.topology_cmd", "command", True),
    "doctor": ("xpu_cdi.doctor.command", "command", True),
    "system": ("xpu_cdi.devchar", "command", True),
    "device-plugin": ("xpu_cdi.deviceplugin.command", "command", True),
    "dra-driver": ("xpu_cdi.dra.command", "command", True),
}


if __name__ == "__main__":  # pragma: no cover
    main()
