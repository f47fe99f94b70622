"""What every ``xpu-cdi`` command shares: errors as one line and an exit
code, the root options (--profile, --profiles-dir, the three host roots),
the spec options of generate and watch, and the first two steps of the
generate flow.

Each subsystem's ``command.py`` imports this module, never ``cli``: ``cli``
imports them (on first use), so the dependency goes one way.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Dict, Optional, Sequence, Tuple

import click

from . import binaries, errors, nodeconfig
from .cdi import registry
from .generate import discover as _discover
from .generate import edits as _edits
from .generate import profile as _profile
from .generate import spec as _spec
from .model import Discovery

# click uses 2 for usage errors; every other XpuCdiError not listed is 1.
EXIT_CODES = {errors.ProfileError: 3, errors.SpecError: 5}
PROFILE_FAILED = 4  # --profile auto: a profile failed and was skipped; the others' specs were written


def exit_code(err: errors.XpuCdiError) -> int:
    """The exit code for an error: the first matching class in EXIT_CODES, else 1."""
    for cls, code in EXIT_CODES.items():
        if isinstance(err, cls):
            return code
    return 1


class Group(click.Group):
    """A click group that turns our errors into one line on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.XpuCdiError as err:
            click.echo(f"xpu-cdi: {err}", err=True)
            ctx.exit(exit_code(err))


def default_hook_path() -> str:
    """The installed compiled ``xpu-cdi-hook`` (see :mod:`xpu_cdi.binaries`)."""
    return binaries.installed("xpu-cdi-hook")


def root_options(f: Any) -> Any:
    """--profile, --profiles-dir and the three host roots, shared by generate, doctor, topology."""
    for opt in reversed([
        click.option("--profile", "profiles", multiple=True, metavar="NAME|FILE",
                     help="Vendor profile (repeatable); 'auto' (default) takes every profile whose cards are present."),
        click.option("--profiles-dir", multiple=True, default=_profile.DEFAULT_PROFILE_DIRS, show_default=True,
                     help="Directory of admin profiles (*.yaml) that add to or replace the built-in ones."),
        click.option("--dev-root", default="/", show_default=True, help="Where the host's /dev is."),
        click.option("--driver-root", default="/", show_default=True, help="Where driver files (/usr/local/...) are."),
        click.option("--sysfs-root", default="/", show_default=True, help="sysfs is read from <root>/sys."),
    ]):
        f = opt(f)
    return f


@functools.lru_cache(maxsize=None)  # click.option mutates the function: build each command once
def subcommand(name: str, f: Any, options: Tuple[Any, ...]) -> click.Command:
    """The command *name* running *f*, with *options* (in --help order) and the root options."""
    for opt in reversed(options):
        f = opt(f)
    return click.command(name)(root_options(f))


# where the commands that read specs (list, doctor, the daemons) look, and the node config they follow
SPEC_DIRS_OPTION = click.option("--spec-dir", "spec_dirs", multiple=True, default=registry.DEFAULT_DIRS,
                                show_default=True, help="CDI spec directory, lowest priority first (repeatable).")
NODE_CONFIG_OPTION = click.option("--node-config", default=nodeconfig.DEFAULT_PATH, show_default=True,
                                  help="The node config (docs/operations.md): what the hook, the wrapper and "
                                       "the daemons follow on this node.")

# the flags generate and watch share: how the spec they write is built
SPEC_OPTIONS = (
    click.option("--device-name-strategy", "strategies", multiple=True, type=click.Choice(_spec.STRATEGIES),
                 help="How devices are named: 'index' (0, 1, ...; default) and/or 'pci' (0000:3b:00.0). "
                      "Repeatable."),
    click.option("--no-all-device", is_flag=True, help="Do not add the 'all' device."),
    click.option("--hook-path", default=None, help="Absolute path of xpu-cdi-hook written into spec hooks."),
    click.option("--ld-library-path-env", is_flag=True,
                 help="Set LD_LIBRARY_PATH instead of adding the update-ldcache hook (replaces the image's own "
                      "value)."),
)


def spec_options(strategies: Sequence[str], no_all_device: bool, hook_path: Optional[str],
                 ld_library_path_env: bool, vendor: Optional[str] = None,
                 device_class: Optional[str] = None) -> _spec.SpecOptions:
    """The SpecOptions of SPEC_OPTIONS' flags (and generate's --vendor, --class).

    Raises:
        SpecError: a relative --hook-path (runtimes exec hooks by absolute path).
    """
    hook = hook_path or default_hook_path()
    if not os.path.isabs(hook):
        raise errors.SpecError(f"--hook-path {hook!r} must be absolute: runtimes do not search PATH for hooks")
    return _spec.SpecOptions(edit=_edits.EditOptions(hook_path=hook, ld_library_path_env=ld_library_path_env),
                             name_strategies=tuple(strategies) or ("index",), all_device=not no_all_device,
                             vendor=vendor, device_class=device_class)


def echo_labels(labels: Dict[str, str], as_json: bool) -> None:
    """Node labels as ``topology --labels`` and ``labels`` print them: ``key=value`` lines, or a JSON object."""
    if as_json:
        click.echo(json.dumps(labels, indent=2, sort_keys=True))
    else:
        for key in sorted(labels):
            click.echo(f"{key}={labels[key]}")


def roots_of(dev_root: str, driver_root: str, sysfs_root: str) -> _discover.Roots:
    """The three roots as absolute paths."""
    return _discover.Roots(os.path.abspath(dev_root), os.path.abspath(driver_root), os.path.abspath(sysfs_root))


def plan(profiles: Sequence[str], profiles_dir: Sequence[str], roots: _discover.Roots) -> Discovery:
    """Profiles -> host views and failed profiles (the first two steps of the generate flow)."""
    chosen = _profile.select(list(profiles) or None, profiles_dir)
    auto = not profiles or list(profiles) == ["auto"]
    return _discover.discover_all(chosen, roots, auto=auto)
