"""``xpu-cdi system create-dev-char-symlinks``: the ``/dev/char/<major>:<minor>``
links of every card, companion and control node the profiles find.

runc's systemd cgroup driver turns a container's device rules into device
paths through these links (systemd takes paths, not numbers).  udev makes
them for the nodes it announced; a node a vendor script made with mknod, or
a ``/dev`` without udev, has none, and a ``systemctl daemon-reload`` or a
driver reload then silently takes the device away from running containers.
NVIDIA's ``nvidia-ctk system create-dev-char-symlinks`` answers the same
problem for its nodes; this is the same idea for our profiles.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Sequence, Tuple

from . import clikit
from .errors import DiscoveryError, SpecError
from .generate.discover import Roots, host_path
from .model import HostView

Link = Tuple[str, str]  # (link path, target relative to the link's directory)


def wanted(views: Sequence[HostView], roots: Roots) -> List[Link]:
    """The links the character nodes of *views* need, one per major:minor, in node order."""
    base = host_path(roots.dev, "/dev/char")
    out: List[Link] = []
    seen = set()
    for view in views:
        nodes = [n for c in view.cards for n in c.nodes] + list(view.shared_nodes)
        for node in nodes:
            info = node.host
            key = (info.major, info.minor)
            if info.type != "c" or key in seen:
                continue
            seen.add(key)
            out.append((os.path.join(base, f"{info.major}:{info.minor}"), os.path.relpath(info.path, base)))
    return out


def missing(links: Sequence[Link]) -> List[Link]:
    """Those of *links* that are absent or point elsewhere."""
    out = []
    for link, target in links:
        want = os.path.normpath(os.path.join(os.path.dirname(link), target))
        if not os.path.islink(link) or os.path.realpath(link) != os.path.realpath(want):
            out.append((link, target))
    return out


def create(links: Sequence[Link]) -> None:
    """Create (or replace) each link atomically: a new link under a temp name, then rename."""
    for link, target in links:
        os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
        tmp = f"{link}.xpu-cdi-tmp"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(target, tmp)
        os.replace(tmp, link)


def command() -> Any:
    """The ``system`` click group (built on first use, as the other lazy commands)."""
    import click

    @click.group("system")
    def system() -> None:
        """Host set-up the runtimes rely on."""

    def run(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
            sysfs_root: str, dry_run: bool) -> None:
        """Create the /dev/char/MAJOR:MINOR links of every accelerator node (runc's systemd cgroup
        driver needs them to keep device access across a daemon-reload or a driver reload)."""
        roots = clikit.roots_of(dev_root, driver_root, sysfs_root)
        try:
            found = clikit.plan(profiles, profiles_dir, roots)
        except DiscoveryError as err:
            if profiles and list(profiles) != ["auto"]:
                raise
            # the refresh service runs this on every host: no cards is not an error here
            click.echo(f"no accelerator nodes, no links needed ({err})")
            return
        for _name, failure in found.failures:
            click.echo(f"xpu-cdi: skipped: {failure}", err=True)
        todo = missing(wanted(found.views, roots))
        for link, target in todo:
            click.echo(f"{'would create' if dry_run else 'created'} {link} -> {target}")
        if not dry_run:
            try:
                create(todo)
            except OSError as err:
                raise SpecError(f"cannot create {err.filename!r}: {err.strerror}: run as root") from err
        if not todo:
            click.echo("all /dev/char links present")
        if found.failures:
            sys.exit(clikit.PROFILE_FAILED)

    system.add_command(clikit.subcommand("create-dev-char-symlinks", run, (
        click.option("--dry-run", is_flag=True, help="Print the links that would be created; change nothing."),)))
    return system
