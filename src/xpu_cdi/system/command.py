"""``xpu-cdi system``: the click group and ``create-dev-char-symlinks``."""

from __future__ import annotations

import sys
from typing import Tuple

import click

from .. import clikit
from ..errors import DiscoveryError
from ..generate.options import plan, roots_of
from . import devchar


def create_dev_char_symlinks(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str,
                             driver_root: str, sysfs_root: str, dry_run: bool) -> None:
    """Create the /dev/char/MAJOR:MINOR links of every accelerator node (runc's systemd cgroup
    driver needs them to keep device access across a daemon-reload or a driver reload)."""
    roots = roots_of(dev_root, driver_root, sysfs_root)
    try:
        found = plan(profiles, profiles_dir, roots)
    except DiscoveryError as err:
        if profiles and list(profiles) != ["auto"]:
            raise
        # the refresh service runs this on every host: no cards is not an error here
        click.echo(f"no accelerator nodes, no links needed ({err})")
        return
    for _name, failure in found.failures:
        click.echo(f"xpu-cdi: skipped: {failure}", err=True)
    todo = devchar.missing(devchar.wanted(found.views, roots))
    for link, target in todo:
        if not dry_run:
            devchar.create(link, target)  # said only once done: a failure stops before its line
        click.echo(f"{'would create' if dry_run else 'created'} {link} -> {target}")
    if not todo:
        click.echo("all /dev/char links present")
    if found.failures:
        sys.exit(clikit.PROFILE_FAILED)


@click.group("system")
def system() -> None:
    """Host set-up the runtimes rely on."""


system.add_command(clikit.subcommand("create-dev-char-symlinks", create_dev_char_symlinks, (
    click.option("--dry-run", is_flag=True, help="Print the links that would be created; change nothing."),)))


def command() -> click.Group:
    """The ``system`` click group (``cli`` loads it on first use)."""
    return system
