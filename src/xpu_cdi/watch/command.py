"""``xpu-cdi watch``: regenerate the specs when cards or the driver change (the watcher is
:mod:`xpu_cdi.watch`, one refresh pass :mod:`.refresh`)."""

from __future__ import annotations

import functools
import os
import signal
from typing import Optional, Tuple

import click

from .. import clikit
from ..generate import options as _options
from ..generate import profile as _profile
from ..generate.discover import host_path
from ..node import uevents
from . import Watcher, expand, watch_files
from .refresh import Target, refresh


def run(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
        sysfs_root: str, spec_dir: str, fmt: str, once: bool, manifest: Optional[str], source: str,
        debounce: float, poll_interval: float, extra_files: Tuple[str, ...], modules: Tuple[str, ...],
        strategies: Tuple[str, ...], no_all_device: bool, hook_path: Optional[str],
        ld_library_path_env: bool, log_level: str, verbose: bool, log_format: str) -> None:
    """Regenerate the specs when cards or the driver change.

    Listens to uevents (cards added or removed, the driver module
    loaded or unloaded, PCI devices of the profiles' vendors bound or
    unbound) and polls driver version files and the profile
    directories; after DEBOUNCE quiet seconds it runs the generate
    pipeline and rewrites a spec only when its content changed. Specs
    of kinds whose cards are all gone are removed. One log line per change.
    """
    _stderr_log = clikit.daemon_log("xpu-cdi watch", log_level, verbose, log_format)
    opts = _options.spec_options(strategies, no_all_device, hook_path, ld_library_path_env)
    roots = _options.roots_of(dev_root, driver_root, sysfs_root)
    target = Target(plan=functools.partial(_options.plan, profiles, profiles_dir, roots),
                    select=functools.partial(_profile.select, list(profiles) or None, profiles_dir),
                    spec_dir=os.path.abspath(spec_dir), fmt=fmt, options=opts, manifest=manifest)
    if once:
        refresh(target, _stderr_log)
        return
    files = [host_path(roots.driver, expand(f)) for f in watch_files(target.select(), extra_files)]
    files += [d for d in profiles_dir]
    watcher = Watcher(target, files, _stderr_log, modules, debounce=debounce, poll_interval=poll_interval)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: watcher.stop.set())
    signal.signal(signal.SIGHUP, lambda *_: watcher.trigger("SIGHUP"))
    mon = uevents.open_source(source, _stderr_log)
    _stderr_log(f"watching {spec_dir} ({'no uevents' if mon is None else 'uevents'}, "
                f"{len(files)} files every {poll_interval:g}s)")
    watcher.loop(mon)
    _stderr_log(f"stopped after {watcher.runs} run(s)")


OPTIONS = (
    click.option("--spec-dir", default="/etc/cdi", show_default=True, help="Directory the specs are kept in."),
    click.option("--format", "fmt", type=click.Choice(["json", "yaml"]), default="json", show_default=True),
    click.option("--once", is_flag=True, help="One refresh, then exit (for the systemd unit and package scripts)."),
    click.option("--manifest", metavar="FILE", help="Record the files written here (the package removes them)."),
    click.option("--source", type=click.Choice(uevents.SOURCES), default="auto",
                 show_default=True, help="uevents after udev rules ran, raw kernel ones, or none (files only)."),
    click.option("--debounce", type=clikit.Seconds(0, 3600), default=2.0, show_default=True,
                 help="Quiet seconds before a refresh."),
    click.option("--poll-interval", type=clikit.Seconds(0.1, 3600), default=5.0, show_default=True,
                 help="Seconds between checks of the watched files."),
    click.option("--watch-file", "extra_files", multiple=True, metavar="PATH",
                 help="Another file whose change means a driver update (under --driver-root; %v = kernel release)."),
    click.option("--module", "modules", multiple=True, metavar="NAME",
                 help="Another kernel module whose (re)load triggers a refresh, besides the profiles' "
                      "`modules` (when neither names any: every module)."),
) + _options.SPEC_OPTIONS + clikit.LOG_OPTIONS


def command() -> click.Command:
    """The ``watch`` click command (``cli`` builds it on first use)."""
    return clikit.subcommand("watch", run, OPTIONS, envvars=True)
