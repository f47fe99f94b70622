"""What the node daemons serve: the cards the CDI specs on disk define.

The device plugin advertises them, the DRA driver publishes them, the exporter
and doctor report on them.  No daemon writes a spec (``generate``, ``watch`` or the DaemonSet's
init container do; one writer).  It reads the spec directories with the
runtimes' own rules (:mod:`xpu_cdi.cdi.registry`), so an ID a daemon hands out is
exactly a device a runtime will resolve: kubelet checks nothing, and a name no
spec defines would only fail later, as "unresolvable CDI devices", in a pod.

Device IDs are CDI device names.  ``all`` is never one (it is not a card), and
a card named twice (``--device-name-strategy index,pci``) is advertised once,
under its first name: two IDs for one card would let kubelet hand it to two
pods.  Topology (PCI address, NUMA node, PCIe switch) comes from the spec's
``xpu-cdi.io/`` annotations when it has them, else from sysfs by the node's
numbers.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import hoststat, interconnect, topology
from ..cdi import registry
from ..generate.discover import host_path


@dataclass(frozen=True)
class NodeRef:
    """A device node as the spec describes it (host path, type, numbers when given)."""

    path: str
    type: str = "c"
    major: Optional[int] = None
    minor: Optional[int] = None


@dataclass(frozen=True)
class SpecCard:
    """One card as the CDI specs on disk define it (what the daemons advertise and judge);
    :class:`xpu_cdi.model.Card` is a card ``generate`` found on the host."""

    id: str  # the CDI device name within the kind
    kind: str
    nodes: Tuple[NodeRef, ...]  # the device's own nodes
    index: Optional[int] = None  # card index (hook index / numeric name), for driver state files and env
    pci: Optional[str] = None
    numa_node: Optional[int] = None  # only a NUMA node this host has
    switch: Optional[str] = None
    root_port: Optional[str] = None
    hccs_domain: Optional[int] = None  # its interconnect domain (:func:`with_domains`)

    def topo(self) -> Dict[str, Any]:
        """The card as :func:`xpu_cdi.allocate.preferred` takes it."""
        return {"name": self.id, "switch": self.switch, "root_port": self.root_port, "numa_node": self.numa_node,
                "hccs_domain": self.hccs_domain}


@dataclass
class KindSet:
    """The cards of one CDI kind, from the spec that defines them."""

    kind: str
    profile: Optional[str]  # profile name from the hook index, when the spec has one
    cards: Dict[str, SpecCard] = field(default_factory=dict)  # id -> card, in spec order
    shared: Tuple[NodeRef, ...] = ()  # the spec's shared nodes (control nodes)
    spec_paths: Tuple[str, ...] = ()
    specs: Dict[str, Any] = field(default_factory=dict)  # spec path -> the parsed spec
    env_var: Optional[str] = None  # the profile's first selection variable (envvar strategy)


def node_refs(edits: Dict[str, Any]) -> Tuple[NodeRef, ...]:
    """The device nodes of a ``containerEdits`` object."""
    out = []
    for n in edits.get("deviceNodes") or []:
        path = n.get("hostPath") or n.get("path")
        if not isinstance(path, str):
            continue
        major, minor = n.get("major"), n.get("minor")
        out.append(NodeRef(path, str(n.get("type") or "c"),
                           major if isinstance(major, int) else None, minor if isinstance(minor, int) else None))
    return tuple(out)


def numa_known(sysfs_root: str, numa: Optional[int]) -> Optional[int]:
    """*numa* when it is a NUMA node this host has (``/sys/devices/system/node/node<N>``), else None.

    sysfs says -1 for "no affinity", and a wrong id in the topology makes
    kubelet's topology manager refuse pods, so anything unproven is left out.
    """
    if numa is None or numa < 0:
        return None
    return numa if os.path.isdir(host_path(sysfs_root, f"/sys/devices/system/node/node{numa}")) else None


def _topology(sysfs_root: str, nodes: Sequence[NodeRef], ann: Dict[str, Any]) -> Dict[str, Any]:
    pci = ann.get(topology.ANNOTATION_PREFIX + "pci")
    numa: Optional[int] = None
    raw_numa = ann.get(topology.ANNOTATION_PREFIX + "numa-node")
    if isinstance(raw_numa, str) and raw_numa.lstrip("-").isdigit():
        numa = int(raw_numa)
    if not pci:
        for n in nodes:
            if n.type == "c" and n.major is not None and n.minor is not None:
                pci, sys_numa = hoststat.pci_of(sysfs_root, n.major, n.minor)
                numa = sys_numa if numa is None else numa
                if pci:
                    break
    elif numa is None:
        try:
            with open(host_path(sysfs_root, f"/sys/bus/pci/devices/{pci}/numa_node")) as f:
                numa = int(f.read(16).strip())
        except (OSError, ValueError):
            numa = None
    out: Dict[str, Any] = {"pci": pci or None, "numa_node": numa_known(sysfs_root, numa)}
    chain = topology.pci_chain(sysfs_root, pci) if pci else []
    out["switch"] = ann.get(topology.ANNOTATION_PREFIX + "switch") or \
        (topology.upstream_switch(sysfs_root, chain) if chain else None)
    out["root_port"] = ann.get(topology.ANNOTATION_PREFIX + "root-port") or (chain[0] if len(chain) > 1 else None)
    return out


def _index_of(name: str, by_name: Dict[str, int]) -> Optional[int]:
    if name in by_name:
        return by_name[name]
    return int(name) if name.isdigit() else None


def load(spec_dirs: Sequence[str], ours: Dict[str, str], sysfs_root: str) -> Tuple[Dict[str, KindSet], List[str]]:
    """The cards of every kind of ours that the spec directories define.

    Args:
        spec_dirs: CDI spec directories, lowest priority first.
        ours: kind -> profile name of every kind the plugin serves (from the
            profiles; a spec whose hook index names a profile of ours counts too).
        sysfs_root: where sysfs is read for topology.

    Returns:
        ``(kinds, problems)``: kind -> :class:`KindSet` (only kinds with at
        least one card), and one line per broken spec file or conflict.
    """
    reg = registry.load(spec_dirs)
    profile_names = set(ours.values())
    kinds: Dict[str, KindSet] = {}
    seen_nodes: Dict[str, Dict[Tuple[str, ...], str]] = {}
    for dev in reg.devices.values():
        index = reg.indexes.get(dev.kind) or {}
        if dev.kind not in ours and index.get("profile") not in profile_names:
            continue
        all_name = index.get("all", "all") if index else "all"
        if dev.name == all_name or dev.name == "all":
            continue
        own = node_refs(dev.edits)
        if not own:
            continue  # nothing of its own to hand out or to check
        ks = kinds.get(dev.kind)
        if ks is None:
            selection = (index.get("selection") or {}).get("env") or []
            ks = kinds[dev.kind] = KindSet(dev.kind, index.get("profile") or ours.get(dev.kind),
                                           env_var=selection[0] if selection else None)
            ks.shared = node_refs(dev.spec.get("containerEdits") or {})
        key = tuple(sorted(n.path for n in own))
        if key in seen_nodes.setdefault(dev.kind, {}):
            continue  # the same card under a second name
        seen_nodes[dev.kind][key] = dev.name
        if dev.path not in ks.spec_paths:
            ks.spec_paths += (dev.path,)
            ks.specs[dev.path] = dev.spec
        by_name = {str(v): int(k) for k, v in (index.get("indices") or {}).items() if str(k).isdigit()}
        ann = next((d.get("annotations") for d in dev.spec.get("devices") or []
                    if isinstance(d, dict) and d.get("name") == dev.name), None)
        topo = _topology(sysfs_root, own, ann if isinstance(ann, dict) else {})
        ks.cards[dev.name] = SpecCard(dev.name, dev.kind, own, _index_of(dev.name, by_name), **topo)
    return kinds, list(reg.problems)


def with_domains(kinds: Dict[str, KindSet], profile_of: Callable[[Optional[str]], Any],
                 sysfs_root: str) -> Dict[str, KindSet]:
    """*kinds* with each card's interconnect domain where its profile has a rule for this host
    (:func:`xpu_cdi.interconnect.domain_rule`); a card whose index is no physical id of the server
    (a vNPU's id) or that has none gets none."""
    out = {}
    for kind, ks in kinds.items():
        profile = profile_of(ks.profile)
        size, _model, count, _why = interconnect.domain_rule(profile, sysfs_root) if profile else (0, "", 0, "")
        if not size:
            out[kind] = ks
            continue
        cards = {cid: dataclasses.replace(c, hccs_domain=c.index // size)
                 if c.index is not None and 0 <= c.index < count else c
                 for cid, c in ks.cards.items()}
        out[kind] = dataclasses.replace(ks, cards=cards)
    return out


def signature(spec_dirs: Sequence[str]) -> Tuple[Any, ...]:
    """What changes when a spec file (or its hook index) is written, added or removed: cheap, a few stats."""
    out: List[Any] = []
    for d in spec_dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            out.append((d, None))
            continue
        for name in names:
            if name.endswith((".json", ".yaml", registry.INDEX_SUFFIX)):
                try:
                    st = os.stat(os.path.join(d, name))
                except OSError:
                    continue
                out.append((d, name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def node_dirs(kinds: Dict[str, KindSet]) -> List[str]:
    """The directories of every card's device nodes: where a node vanishing or coming back is seen."""
    return [os.path.dirname(n.path) for ks in kinds.values() for card in ks.cards.values() for n in card.nodes]
