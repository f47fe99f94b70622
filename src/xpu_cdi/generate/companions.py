"""Per-card companion nodes: nodes that belong to one card and go into that
card's CDI device, never into the spec-level edits (where every container
would get every card's node).

Two ways a profile names them (``cards[].companions``):

- a path template with ``{index}``: Cambricon's ``/dev/commu{index}``,
  Gaudi's ``/dev/accel/accel_controlD{index}``;
- a class directory under the card's PCI function,
  ``/sys/bus/pci/devices/<bdf>/<sysfs>/<name>``: the DRI nodes of a Hygon or
  Moore Threads card (``card<N>`` and ``renderD<M>`` are numbered
  independently, and a BMC's VGA takes ``card0``, so only the PCI function
  says which pair is whose).
"""

from __future__ import annotations

import glob as _glob
import os
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import DiscoveryError
from ..model import Card, CardRule, Companion, DeviceNode, Profile
from .. import hostfs as _d

Numbers = Tuple[int, int]


def _sysfs_entries(roots: _d.Roots, pci: str, subdir: str) -> List[Tuple[str, Optional[Numbers]]]:
    """(name, (major, minor) from its ``dev`` file) of each class device under the PCI function."""
    base = _d.host_path(roots.sysfs, f"/sys/bus/pci/devices/{pci}/{subdir}")
    out = []
    for name in _d.listdir_sorted(base):
        try:
            with open(os.path.join(base, name, "dev")) as f:
                major, _, minor = f.read(32).strip().partition(":")
            out.append((name, (int(major), int(minor))))
        except (OSError, ValueError):
            continue  # not a class device (power/, uevent, ...)
    return out


def _candidates(comp: Companion, card: Card, pci: Optional[str], roots: _d.Roots,
                notes: List[str]) -> List[Tuple[str, Optional[Numbers]]]:
    """Host paths (with the numbers sysfs expects, if known) one companion rule gives one card."""
    if comp.sysfs is None:
        pattern = _d.host_path(roots.dev, comp.path.format(index=card.index))
        if _d.has_magic(pattern):
            return [(p, None) for p in sorted(_glob.glob(pattern))]
        return [(pattern, None)] if os.path.lexists(pattern) else []
    if pci is None:
        notes.append(f"card {card.index} ({card.nodes[0].container_path}): no PCI function in sysfs, so its "
                     f"{comp.path.replace('{name}', '*')} nodes (found through "
                     f"/sys/bus/pci/devices/<bdf>/{comp.sysfs}/) are not added")
        return []
    return [(_d.host_path(roots.dev, comp.path.format(name=name, index=card.index)), nums)
            for name, nums in _sysfs_entries(roots, pci, comp.sysfs)]


def attach(profile: Profile, cards: Sequence[Card], rules: Dict[int, CardRule], roots: _d.Roots,
           notes: List[str]) -> List[Card]:
    """*cards* with the companion nodes of their rule appended (card node first).

    Absent optional companions are summed up in one note per rule; a match
    that is not a device node, or whose numbers differ from what sysfs says
    the card's node is, is skipped with a note of its own.

    Raises:
        DiscoveryError: a required companion is missing.
    """
    out: List[Card] = []
    absent: Dict[str, List[int]] = {}
    for card in cards:
        own = {n.host.path for n in card.nodes}
        extra: List[Tuple[str, Optional[Numbers]]] = []
        for comp in rules[card.index].companions:
            found = [(p, n) for p, n in _candidates(comp, card, card.pci, roots, notes) if p not in own]
            if not found and comp.sysfs is None:
                if comp.required:
                    raise DiscoveryError(f"profile {profile.name!r}: card {card.index} has no "
                                         f"{comp.path.format(index=card.index)!r}: reload the driver")
                absent.setdefault(comp.path, []).append(card.index)
            for hostp, nums in found:
                kind = _d.node_kind(hostp)
                shown = _d.container_path(roots.dev, hostp)
                if kind not in ("c", "b"):
                    notes.append(_d.not_a_node(shown, kind))
                    continue
                extra.append((hostp, nums))
                own.add(hostp)
        infos = _d.stat_all([p for p, _n in extra], profile)
        nodes = list(card.nodes)
        for (hostp, nums), info in zip(extra, infos):
            shown = _d.container_path(roots.dev, hostp)
            if nums is not None and (info.major, info.minor) != nums:
                notes.append(f"{shown!r} is {info.major}:{info.minor} but card {card.index}'s PCI function "
                             f"lists {nums[0]}:{nums[1]}: skipped (a stale node; `udevadm trigger` recreates it)")
                continue
            nodes.append(DeviceNode(shown, info))
        out.append(Card(index=card.index, nodes=tuple(nodes), pci=card.pci, numa_node=card.numa_node))
    for path, indices in absent.items():
        notes.append(f"optional per-card node {path!r} not present for card(s) "
                     f"{','.join(map(str, indices))}: skipped")
    return out
