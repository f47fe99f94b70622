"""Where each card sits on the PCIe tree, and which cards belong together.

Read from sysfs under ``--sysfs-root``: a card's PCI address and NUMA node
(from discovery), the chain of bridges above it, the closest upstream port
of a PCIe switch, its root port and its link state.  :func:`preferred`
answers a device plugin's ``GetPreferredAllocation``: multi-card jobs whose
cards sit under different switches pay for every crossing (seed report 4).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import interconnect
from .allocate import distance, preferred
from ..cdi import names as cdi_names
from ..hostfs import host_path
from ..model import PCI_ADDRESS, HostView

__all__ = ["TopoCard", "cards", "compress", "degraded", "device_annotations", "distance", "groups", "labels",
           "label_value_problem", "link_info", "pci_chain", "pcie_root", "port_type", "preferred",
           "upstream_switch"]

# PCI Express capability, "Device/Port Type" field (PCIe base spec 7.5.3.2)
PCIE_CAP_ID = 0x10
ROOT_PORT, UPSTREAM_PORT, DOWNSTREAM_PORT = 0x4, 0x5, 0x6
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


@dataclass(frozen=True)
class TopoCard:
    """One card and its place on the PCIe tree."""

    name: str  # CDI device name (the card index)
    kind: str
    index: int
    path: str  # device node as the container sees it
    pci: Optional[str] = None
    numa_node: Optional[int] = None
    switch: Optional[str] = None  # PCI address of the closest upstream switch port
    root_port: Optional[str] = None
    link: Tuple[Tuple[str, str], ...] = ()  # sysfs link attributes that exist
    unknown: str = ""  # why the placement is unknown (the profile's topology_unknown), when it is
    hccs_domain: Optional[int] = None  # its interconnect domain (xpu_cdi.interconnect), where a rule holds

    def to_dict(self) -> Dict[str, Any]:
        """The card as ``topology --json`` prints it."""
        out = {"name": self.name, "kind": self.kind, "device": f"{self.kind}={self.name}",
               "path": self.path, "pci": self.pci, "numa_node": self.numa_node,
               "switch": self.switch, "root_port": self.root_port, "link": dict(self.link)}
        if self.unknown and self.pci is None:
            out["topology"] = "unknown"
            out["why"] = self.unknown
        if self.hccs_domain is not None:
            out["hccs_domain"] = self.hccs_domain
        return out


def pci_chain(sysfs_root: str, pci: str) -> List[str]:
    """PCI addresses from the root complex down to *pci* (inclusive).

    Returns:
        ``[root port, ..., pci]``; just ``[pci]`` for a device on a root bus,
        ``[]`` when sysfs does not know the device.
    """
    link = host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}")
    if not os.path.exists(link):
        return []
    parts = os.path.realpath(link).split(os.sep)
    return [p for p in parts if PCI_ADDRESS.match(p)]


def pcie_root(sysfs_root: str, pci: str) -> Optional[str]:
    """The PCIe root complex above *pci* as sysfs names it (``pci0000:00``), or None.

    The first directory below ``/sys/devices`` on the device's real path: the
    value of Kubernetes' standard ``resource.kubernetes.io/pcieRoot`` attribute.
    """
    link = host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}")
    devices = os.path.realpath(host_path(sysfs_root, "/sys/devices"))
    real = os.path.realpath(link)
    if not os.path.exists(link) or not real.startswith(devices + os.sep):
        return None
    top = real[len(devices) + 1:].split(os.sep)[0]
    return top if top.startswith("pci") else None


def port_type(sysfs_root: str, pci: str) -> Optional[int]:
    """The PCIe port type of a device from its config space, or None when unreadable.

    sysfs has no attribute for it; the ``config`` file holds the capability
    list (root can read all of it, others only the first 64 bytes).
    """
    try:
        with open(host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}/config"), "rb") as f:
            cfg = f.read(256)
    except OSError:
        return None
    if len(cfg) < 0x40 or not cfg[0x06] & 0x10:  # status register: capability list present
        return None
    ptr, seen = cfg[0x34] & 0xFC, set()
    while 0x40 <= ptr <= len(cfg) - 4 and ptr not in seen:
        seen.add(ptr)
        if cfg[ptr] == PCIE_CAP_ID:
            return (cfg[ptr + 2] >> 4) & 0xF
        ptr = cfg[ptr + 1] & 0xFC
    return None


def upstream_switch(sysfs_root: str, chain: Sequence[str]) -> Optional[str]:
    """The closest upstream switch port above the last device of *chain*, or None.

    Port types from config space decide when every bridge has them; otherwise
    the shape does: below the root port, bridges come in (upstream,
    downstream) pairs, so the upstream port is the card's grandparent.
    """
    bridges = list(chain[1:-1])  # chain[0] is the root port, chain[-1] the card
    types = [port_type(sysfs_root, b) for b in bridges]
    if bridges and all(t is not None for t in types):
        ups = [b for b, t in zip(bridges, types) if t == UPSTREAM_PORT]
        return ups[-1] if ups else None
    if len(bridges) >= 2:
        return bridges[-2] if len(bridges) % 2 == 0 else bridges[-1]
    return None


def link_info(sysfs_root: str, pci: str) -> Tuple[Tuple[str, str], ...]:
    """The PCIe link attributes sysfs has for *pci* (speed and width, current and max)."""
    out = []
    for name in LINK_FILES:
        try:
            with open(host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}/{name}")) as f:
                value = f.read(64).strip()
        except OSError:
            continue
        if value:
            out.append((name, value))
    return tuple(out)


def cards(view: HostView, sysfs_root: str, kind: Optional[str] = None) -> List[TopoCard]:
    """The cards of one discovered profile with their topology.

    Args:
        view: what discovery found (cards carry PCI address and NUMA node).
        sysfs_root: where ``/sys`` is read from.
        kind: the CDI kind to report (default: the profile's).
    """
    out = []
    size, _model, count, _why = interconnect.domain_rule(view.profile, sysfs_root)
    for card in view.cards:
        chain = pci_chain(sysfs_root, card.pci) if card.pci else []
        out.append(TopoCard(
            name=str(card.index), kind=kind or view.profile.kind, index=card.index,
            path=card.nodes[0].container_path, pci=card.pci, numa_node=card.numa_node,
            switch=upstream_switch(sysfs_root, chain) if chain else None,
            root_port=chain[0] if len(chain) > 1 else None,
            link=link_info(sysfs_root, card.pci) if card.pci else (),
            unknown=view.profile.topology_unknown,
            hccs_domain=card.index // size if size and 0 <= card.index < count else None))
    return out


def degraded(card: TopoCard) -> Optional[str]:
    """Why the card's link runs below its maximum (``"x8 of x16"``), or None."""
    link = dict(card.link)
    problems = []
    if link.get("current_link_width") and link.get("max_link_width") \
            and link["current_link_width"] != link["max_link_width"]:
        problems.append(f"x{link['current_link_width']} of x{link['max_link_width']}")
    if link.get("current_link_speed") and link.get("max_link_speed") \
            and link["current_link_speed"] != link["max_link_speed"]:
        problems.append(f"{link['current_link_speed']} of {link['max_link_speed']}")
    return ", ".join(problems) or None


def group_key(card: TopoCard) -> str:
    """What a card shares with its closest neighbours: the switch, else its own address."""
    return card.switch or card.root_port or card.pci or f"card {card.name}"


def groups(topo: Sequence[TopoCard]) -> List[List[TopoCard]]:
    """Cards grouped by switch (a card without one is its own group), ordered by first index."""
    by: Dict[str, List[TopoCard]] = {}
    for card in sorted(topo, key=lambda c: c.index):
        by.setdefault(group_key(card), []).append(card)
    return list(by.values())


ANNOTATION_PREFIX = "xpu-cdi.io/"


def device_annotations(topo: Sequence[TopoCard], names: Mapping[int, Sequence[str]]) -> Dict[str, Dict[str, str]]:
    """Device annotations for ``generate --with-topology`` (they raise cdiVersion to 0.6.0).

    Args:
        topo: the cards with their topology.
        names: card index -> the CDI device names it gets (one per naming strategy).

    Returns:
        device name -> ``{"xpu-cdi.io/pci": ..., "xpu-cdi.io/numa-node": ...,
        "xpu-cdi.io/switch": ..., "xpu-cdi.io/root-port": ...}``, only the facts
        sysfs knows.
    """
    out: Dict[str, Dict[str, str]] = {}
    for card in topo:
        facts = {"pci": card.pci, "numa-node": None if card.numa_node is None else str(card.numa_node),
                 "switch": card.switch, "root-port": card.root_port}
        ann = {ANNOTATION_PREFIX + k: v for k, v in facts.items() if v is not None}
        if ann:
            for name in names.get(card.index, ()):
                out[name] = ann
    return out


def compress(names: Sequence[str]) -> str:
    """Card names as a label-safe list: runs of indices become ``a-b``, items join with ``.``."""
    nums = sorted(int(n) for n in names if n.isdigit())
    parts = []
    for _k, run in itertools.groupby(enumerate(nums), key=lambda p: p[1] - p[0]):
        seq = [n for _i, n in run]
        parts.append(str(seq[0]) if len(seq) == 1 else f"{seq[0]}-{seq[-1]}")
    parts += sorted(n for n in names if not n.isdigit())
    return ".".join(parts)


def label_value_problem(value: str) -> str:
    """Why *value* is not a valid Kubernetes label value (empty, or the name rule), or ``""``."""
    return cdi_names.k8s_name_problem(f"label value {value!r}", value) if value else ""


def labels(topo: Sequence[TopoCard]) -> Tuple[Dict[str, str], List[str]]:
    """Node labels describing the cards of each kind (keys ``xpu-cdi.io/<class>.<fact>``).

    ``switch-groups`` lists the cards behind each switch (``0-3_4-7``: groups
    join with ``_``); ``max-switch-group`` is the biggest job that fits under
    one switch, for node affinity.  A kind whose cards sysfs cannot place
    (Ascend: no parent device) gets only ``count`` and ``topology=unknown``.

    Returns:
        ``(labels, notes)``: a note for each label left out because its value
        would not be a valid label value (too many scattered cards).
    """
    out: Dict[str, str] = {}
    notes: List[str] = []
    kinds = sorted({c.kind for c in topo})
    for kind in kinds:
        mine = [c for c in topo if c.kind == kind]
        grp = groups(mine)
        prefix = f"{ANNOTATION_PREFIX}{kind.partition('/')[2]}."
        if any(c.pci is None for c in mine):  # no NUMA or switch facts for some card: claim none
            out[prefix + "count"] = str(len(mine))
            out[prefix + "topology"] = "unknown"
            continue
        facts = {
            "count": str(len(mine)),
            "numa-nodes": str(len({c.numa_node for c in mine})),
            "switches": str(len({c.switch for c in mine if c.switch})),
            "max-switch-group": str(max(len(g) for g in grp) if any(c.switch for c in mine) else 1),
            "switch-groups": "_".join(compress([c.name for c in g]) for g in grp),
        }
        for key, value in facts.items():
            problem = label_value_problem(value)
            if problem:
                notes.append(f"{prefix}{key} left out: {problem}")
                continue
            out[prefix + key] = value
    return out, notes
