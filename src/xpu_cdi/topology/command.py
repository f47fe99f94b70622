"""``xpu-cdi topology``: the cards grouped by PCIe switch and NUMA node, as
text, JSON for device plugins, node labels, or a preferred allocation."""

from __future__ import annotations

import json
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import click

from .. import topology as _topology
from ..clikit import PROFILE_FAILED, echo_labels, subcommand
from ..errors import SelectionError
from ..generate.options import plan, roots_of


def parse_available(text: str) -> List[str]:
    """``"0,1,4-7"`` -> ``["0", "1", "4", "5", "6", "7"]`` (ranges of indices allowed).

    Raises:
        SelectionError: a malformed range.
    """
    out: List[str] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        lo, sep, hi = item.partition("-")
        if sep and lo.isdigit() and hi.isdigit():
            if int(lo) > int(hi):
                raise SelectionError(f"--available range {item!r} runs backwards: write {hi}-{lo}")
            out += [str(i) for i in range(int(lo), int(hi) + 1)]
        else:
            out.append(item)
    return out


def _link(card: _topology.TopoCard) -> str:
    link = dict(card.link)
    if not link:
        return ""
    text = f"x{link.get('current_link_width', '?')} {link.get('current_link_speed', '')}".rstrip()
    bad = _topology.degraded(card)
    return f"  link {text}" + (f" (degraded: {bad})" if bad else "")


def render(topo: Sequence[_topology.TopoCard]) -> List[str]:
    """Human lines: per kind, per NUMA node, per switch (or root port), one line per card."""
    lines: List[str] = []
    for kind in sorted({c.kind for c in topo}):
        mine = [c for c in topo if c.kind == kind]
        numas = sorted({c.numa_node for c in mine}, key=lambda n: (n is None, n or 0))
        switches = {c.switch for c in mine if c.switch}
        if all(c.pci is None for c in mine) and mine[0].unknown:
            lines.append(f"{kind}: {len(mine)} card(s), topology unknown: {mine[0].unknown}")
            continue
        lines.append(f"{kind}: {len(mine)} card(s), {len(numas)} NUMA node(s), {len(switches)} PCIe switch(es)")
        for numa in numas:
            lines.append(f"  NUMA node {'unknown' if numa is None else numa}")
            for group in _topology.groups([c for c in mine if c.numa_node == numa]):
                first = group[0]
                port = f" (root port {first.root_port})" if first.root_port else ""
                where = f"switch {first.switch}{port}" if first.switch else \
                    (f"no switch{port}" if first.pci else "no PCI information in sysfs")
                names = _topology.compress([c.name for c in group])
                lines.append(f"    {where}: card(s) {names}")
                for c in group:
                    lines.append(f"      {c.name:>3}  {c.path:<16} {c.pci or '-'}{_link(c)}")
    return lines


def run(profiles: Tuple[str, ...], profiles_dir: Tuple[str, ...], dev_root: str, driver_root: str,
        sysfs_root: str, as_json: bool, as_labels: bool, size: Optional[int], available: Optional[str]) -> None:
    """Show where each card sits on the PCIe tree: switch, root port, NUMA node.

    Multi-card jobs run fastest on cards behind one PCIe switch; device
    plugins can use --json or --preferred for GetPreferredAllocation.
    """
    if available is not None and size is None:
        raise click.UsageError("--available only makes sense with --preferred N")
    roots = roots_of(dev_root, driver_root, sysfs_root)
    found = plan(profiles, profiles_dir, roots)
    for _name, failure in found.failures:
        click.echo(f"xpu-cdi: skipped: {failure}", err=True)
    topo = [c for view in found.views for c in _topology.cards(view, roots.sysfs)]
    show(topo, as_json, as_labels, size, available)
    if found.failures:
        sys.exit(PROFILE_FAILED)


def show(topo: Sequence[_topology.TopoCard], as_json: bool, as_labels: bool, size: Optional[int],
         available: Optional[str]) -> None:
    """Print *topo* in the form the options ask for.

    Raises:
        SelectionError: --preferred over cards of several kinds.
    """
    if size is not None:
        kinds = sorted({c.kind for c in topo})
        if len(kinds) > 1:
            raise SelectionError(f"cards of several kinds were found ({', '.join(kinds)}): "
                                 f"choose one with --profile")
        chosen = _topology.preferred(topo, parse_available(available) if available is not None else None, size)
        click.echo(json.dumps(chosen) if as_json else ",".join(chosen))
        return
    if as_labels:
        labels, notes = _topology.labels(topo)
        for note in notes:
            click.echo(f"xpu-cdi: note: {note}", err=True)
        echo_labels(labels, as_json)
        return
    if as_json:
        out: List[Dict[str, object]] = [c.to_dict() for c in topo]
        click.echo(json.dumps(out, indent=2))
        return
    for line in render(topo):
        click.echo(line)


OPTIONS = (
    click.option("--json", "as_json", is_flag=True,
                 help="Print a JSON list of cards: name, kind, device, path, pci, numa_node, switch, root_port, "
                      "link."),
    click.option("--labels", "as_labels", is_flag=True,
                 help="Print node labels (xpu-cdi.io/<class>.switch-groups=0-3_4-7, ...), one key=value a line."),
    click.option("--preferred", "size", type=click.IntRange(min=1), metavar="N",
                 help="Print the best N cards for one job (same switch, then NUMA node, then fewest crossings)."),
    click.option("--available", metavar="NAMES", help="With --preferred: the free cards, e.g. 0,1,4-7 (default: all)."),
)


def command() -> click.Command:
    """The ``topology`` click command (``cli`` builds it on first use)."""
    return subcommand("topology", run, OPTIONS)
