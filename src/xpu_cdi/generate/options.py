"""From the command line to generate's inputs: the spec flags generate and
watch share (``SPEC_OPTIONS`` -> :func:`spec_options`), the three host
roots (:func:`roots_of`) and the first two steps of the flow (:func:`plan`),
which watch, topology, doctor and system run too.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import click

from .. import binaries, errors
from ..model import Discovery
from . import discover as _discover
from . import edits as _edits
from . import profile as _profile
from . import spec as _spec


def default_hook_path() -> str:
    """The installed compiled ``xpu-cdi-hook`` (see :mod:`xpu_cdi.binaries`)."""
    return binaries.installed("xpu-cdi-hook")


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


def roots_of(dev_root: str, driver_root: str, sysfs_root: str) -> _discover.Roots:
    """The three roots as absolute paths."""
    return _discover.Roots(os.path.abspath(dev_root), os.path.abspath(driver_root), os.path.abspath(sysfs_root))


def plan(profiles: Sequence[str], profiles_dir: Sequence[str], roots: _discover.Roots) -> Discovery:
    """Profiles -> host views and failed profiles (the first two steps of the generate flow)."""
    chosen = _profile.select(list(profiles) or None, profiles_dir)
    auto = not profiles or list(profiles) == ["auto"]
    return _discover.discover_all(chosen, roots, auto=auto)
