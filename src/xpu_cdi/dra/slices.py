"""What the driver publishes: the node's cards as ``resource.k8s.io/v1`` ResourceSlices.

One pool per node (named after it), a device per card named as in the CDI
spec (a DNS label: ``3``; a name that is not one, ``0000:3b:00.0``, becomes
``0000-3b-00-0``), with the attributes users select on:

============================================  =========  ===========================
attribute                                     type       from
============================================  =========  ===========================
``index``                                     int        the card's index
``uuid``                                      string     the profile's ``dra.uuid_file``
``model``                                     string     ``dra.models`` (see ``cardmodel``), else the profile name
``driverVersion``                             version    ``dra.driver_version_file`` (first x.y.z)
``resource.kubernetes.io/pciBusID``           string     the card's PCI function
``resource.kubernetes.io/pcieRoot``           string     its root complex (``pci0000:00``)
``pcieSwitch``                                string     the upstream port of its PCIe switch
``numaNode``, ``resource.kubernetes.io/numaNode``  int   its NUMA node (only a node the host has)
``hccsDomain``                                int        its interconnect domain (:mod:`xpu_cdi.interconnect`)
``deviceIP``                                  string     its RoCE address (Ascend: ``/etc/hccn.conf``)
============================================  =========  ===========================

and capacity ``memory`` where the profile knows it (a card of a kind shared by
capacity, :mod:`.shares`, also ``allowMultipleAllocations`` and the memory's
``requestPolicy``).  An unhealthy card keeps
its place with a ``NoSchedule`` taint ``<driver>/unhealthy``: pods running on
it keep running, new claims get other cards.  Where the kind's remediation
policy evicts (:mod:`xpu_cdi.remedy`), the taint's effect becomes
``NoExecute`` once the grace is over: Kubernetes' device taint eviction
controller then deletes the pods whose claims do not tolerate it.

A chip that can be partitioned (:mod:`.partitioned`) also owns a counter set
(``spec.sharedCounters``, in slices of their own: the API takes counters or
devices in a slice, never both) that the chip itself and its partitions'
devices consume (``consumesCounters``), so the scheduler never gives out more
of a chip than it has.

Everything here but :func:`describe` is pure: inventory in, objects out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import cardmodel, interconnect, topology
from ..hostfs import host_path, read_head
from ..model import Profile
from . import shares

API_VERSION = "resource.k8s.io/v1"
MAX_DEVICES = 128  # ResourceSliceMaxDevices
MAX_DEVICES_TAINTED = 64  # ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
MAX_COUNTER_SETS = 8  # ResourceSliceMaxCounterSets
MAX_ATTRIBUTES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
STANDARD = "resource.kubernetes.io/"
TAINT_EFFECT = "NoSchedule"
EVICTING_EFFECT = "NoExecute"  # the kind's remediation policy evicts the card's pods
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class DeviceInfo:
    """One card as the slice shows it, and the CDI name prepare answers with."""

    name: str  # the device name in the slice (a DNS label)
    cdi: str  # qualified CDI device name, kunlunxin.com/xpu=3
    index: Optional[int] = None
    uuid: str = ""
    model: str = ""
    driver_version: str = ""
    pci: Optional[str] = None
    pcie_root: Optional[str] = None
    switch: Optional[str] = None
    numa: Optional[int] = None
    hccs_domain: Optional[int] = None  # the cards of one domain talk over HCCS (matchAttribute on it)
    device_ip: str = ""  # the card's RoCE address, what other servers' ranks reach it at
    memory: str = ""
    share: Optional[shares.Policy] = None  # shared by capacity (--share-capacity): memory is then set
    # a partitionable chip: the counters it owns (set name, ((counter, quantity), ...)), all of which it consumes
    counters: Tuple[str, Tuple[Tuple[str, str], ...]] = ("", ())
    # a partition: the counter set it takes from and what it takes; its template and parent chip's device
    consumes: Tuple[str, Tuple[Tuple[str, str], ...]] = ("", ())
    template: str = ""
    parent: str = ""
    # a partition: (card, chip) as the vendor's tool names its chip, and the chip's vNPU ids (first, stop)
    tool_ids: Tuple[int, ...] = ()


def device_name(cdi_name: str) -> str:
    """The slice's device name for a CDI device name: itself when a DNS label, else a label made of it."""
    if _LABEL.match(cdi_name):
        return cdi_name
    label = re.sub(r"[^a-z0-9]+", "-", cdi_name.lower()).strip("-")
    return label if _LABEL.match(label) else "dev-" + hashlib.sha256(cdi_name.encode()).hexdigest()[:16]


def describe(card: Any, profile: Optional[Profile], sysfs_root: str, proc_root: str, driver_root: str,
             driver_version: str = "", link: Optional[interconnect.CardLink] = None) -> DeviceInfo:
    """A :class:`DeviceInfo` for one card of :mod:`xpu_cdi.node.inventory` (reads sysfs and driver files);
    *link*: its interconnect facts (:func:`xpu_cdi.interconnect.read`, once per kind)."""
    uuid = ""
    found = cardmodel.of_card(profile, sysfs_root, card.pci)
    model, memory = (found.name, found.memory) if found else ("", "")
    if profile is not None and profile.uuid_file and (card.index is not None or card.pci):
        path = profile.uuid_file.format(index=card.index, pci=card.pci)
        root = proc_root if path.startswith("/proc/") else sysfs_root if path.startswith("/sys/") else driver_root
        uuid = (read_head(host_path(root, path), 128).splitlines() or [""])[0].strip()
    return DeviceInfo(name=device_name(card.id), cdi=f"{card.kind}={card.id}", index=card.index,
                      uuid=uuid[:64], model=model or (profile.name if profile else ""),
                      driver_version=driver_version, pci=card.pci,
                      pcie_root=topology.pcie_root(sysfs_root, card.pci) if card.pci else None,
                      switch=card.switch, numa=card.numa_node, memory=memory,
                      hccs_domain=link.domain if link else None, device_ip=link.device_ip if link else "")


def attributes(info: DeviceInfo) -> Dict[str, Dict[str, Any]]:
    """The device's attributes (``{name: {type: value}}``), only those known."""
    out: Dict[str, Dict[str, Any]] = {}
    if info.index is not None:
        out["index"] = {"int": info.index}
    if info.uuid:
        out["uuid"] = {"string": info.uuid}
    if info.model:
        out["model"] = {"string": info.model[:64]}
    if info.driver_version:
        out["driverVersion"] = {"version": info.driver_version}
    if info.pci:
        out[STANDARD + "pciBusID"] = {"string": info.pci.lower()}
    if info.pcie_root:
        out[STANDARD + "pcieRoot"] = {"string": info.pcie_root}
    if info.switch:
        out["pcieSwitch"] = {"string": info.switch.lower()}
    if info.numa is not None:
        out["numaNode"] = {"int": info.numa}
        out[STANDARD + "numaNode"] = {"int": info.numa}
    if info.hccs_domain is not None:
        out["hccsDomain"] = {"int": info.hccs_domain}
    if info.device_ip:
        out["deviceIP"] = {"string": info.device_ip}
    return out


def taint_key(driver: str) -> str:
    """The key of the taint an unhealthy card carries: ``kunlunxin.com/unhealthy``."""
    return f"{driver}/unhealthy"


def device_type(info: DeviceInfo) -> str:
    """What the device is, as its ``type`` attribute says: ``vnpu`` (carved from a chip), ``share`` (a
    card several claims share), ``chip`` (a whole card or chip)."""
    if info.template or info.parent:
        return "vnpu"
    return "share" if info.share is not None else "chip"


def device_entry(info: DeviceInfo, driver: str, unhealthy: str = "", carved: bool = False,
                 evicting: bool = False) -> Dict[str, Any]:
    """The ``spec.devices[]`` entry of one card; *carved*: its kind has vNPUs, so every device carries
    ``template`` and ``parentChip`` (``""`` where none) and a selector on them never meets a missing key;
    *evicting*: an unhealthy card's taint is ``NoExecute``."""
    attrs = attributes(info)
    attrs["type"] = {"string": device_type(info)}
    if carved or info.template or info.parent:
        attrs["template"] = {"string": info.template}
        attrs["parentChip"] = {"string": info.parent}
        attrs.setdefault("uuid", {"string": ""})  # a vNPU made on demand has none yet
    dev: Dict[str, Any] = {"name": info.name, "attributes": attrs}
    if info.share is not None:  # several claims, each its part of the memory
        dev["allowMultipleAllocations"] = True
        dev["capacity"] = {shares.CAPACITY: info.share.capacity(shares.parse_quantity(info.memory))}
    elif info.memory:
        dev["capacity"] = {"memory": {"value": info.memory}}
    set_name, taken = info.consumes if info.consumes[0] else info.counters
    if set_name:
        dev["consumesCounters"] = [{"counterSet": set_name, "counters": {k: {"value": v} for k, v in taken}}]
    if unhealthy:
        dev["taints"] = [{"key": taint_key(driver), "effect": EVICTING_EFFECT if evicting else TAINT_EFFECT}]
    return dev


def entries(devices: Sequence[DeviceInfo], driver: str, unhealthy: Mapping[str, str],
            evicting: Collection[str] = ()) -> List[Dict[str, Any]]:
    """The ``spec.devices[]`` entries of one driver's devices, each with the same attribute keys; the
    unhealthy ones named in *evicting* tainted ``NoExecute``."""
    carved = any(d.template or d.parent for d in devices)
    return [device_entry(d, driver, unhealthy.get(d.name, ""), carved, d.name in evicting) for d in devices]


def slice_name(node: str, driver: str, number: int) -> str:
    """``<node>-<driver>-<n>``: stable, so an update is a replace, never a delete and create."""
    return f"{node}-{driver}-{number}"


def build(driver: str, node: str, devices: Sequence[DeviceInfo], unhealthy: Mapping[str, str], generation: int,
          node_uid: str = "", evicting: Collection[str] = ()) -> List[Dict[str, Any]]:
    """The ResourceSlices of the node's pool at *generation*: at most 128 devices each (64 when any is tainted).

    A node without cards publishes one slice with no devices: the pool then
    says "this node has none", and a claim is not left waiting for slices.
    """
    made = entries(devices, driver, unhealthy, evicting)
    limit = MAX_DEVICES_TAINTED if any("taints" in e or "consumesCounters" in e for e in made) else MAX_DEVICES
    chunks: List[Tuple[str, List[Any]]] = [("devices", made[i:i + limit])
                                           for i in range(0, len(made), limit)] or [("devices", [])]
    sets = counter_sets(devices)
    chunks += [("sharedCounters", sets[i:i + MAX_COUNTER_SETS]) for i in range(0, len(sets), MAX_COUNTER_SETS)]
    out = []
    for number, (field, chunk) in enumerate(chunks):
        meta: Dict[str, Any] = {"name": slice_name(node, driver, number)}
        if node_uid:  # the node's deletion takes its slices with it
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                        "controller": True}]
        out.append({"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": meta,
                    "spec": {"driver": driver, "nodeName": node,
                             "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                             field: chunk}})
    return out


def counter_sets(devices: Sequence[DeviceInfo]) -> List[Dict[str, Any]]:
    """The ``sharedCounters`` entries of the partitionable chips among *devices*."""
    return [{"name": d.counters[0], "counters": {k: {"value": v} for k, v in d.counters[1]}}
            for d in devices if d.counters[0]]


def _normal(dev: Mapping[str, Any]) -> Dict[str, Any]:
    """A device entry without what the API server adds (a taint's timeAdded) or leaves out (empty fields)."""
    out = {k: v for k, v in dev.items() if v not in (None, {}, [])}
    if out.get("taints"):
        out["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in out["taints"]]
    return out


def content(devices: Sequence[DeviceInfo], driver: str, unhealthy: Mapping[str, str],
            evicting: Collection[str] = ()) -> str:
    """What the pool says, generation aside: equal strings mean nothing to republish."""
    return json.dumps({"devices": [_normal(e) for e in entries(devices, driver, unhealthy, evicting)],
                       "sharedCounters": counter_sets(devices)}, sort_keys=True)


def published_content(slices: Sequence[Mapping[str, Any]]) -> str:
    """:func:`content` of slices read back from the API server (fields it adds dropped)."""
    devices: List[Dict[str, Any]] = []
    sets: List[Dict[str, Any]] = []
    for s in sorted(slices, key=lambda s: _number(s["metadata"].get("name", ""))):
        devices += [_normal(dev) for dev in s.get("spec", {}).get("devices") or []]
        sets += s.get("spec", {}).get("sharedCounters") or []
    return json.dumps({"devices": devices, "sharedCounters": sets}, sort_keys=True)


def _number(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 1 << 30


def by_name(devices: Sequence[DeviceInfo]) -> Dict[str, DeviceInfo]:
    """Slice device name -> device; a second card whose name maps to the same label gets a ``-<n>`` suffix."""
    out: Dict[str, DeviceInfo] = {}
    for d in devices:
        name, n = d.name, 1
        while name in out:
            n += 1
            name = f"{d.name[:60]}-{n}"
        out[name] = d if name == d.name else dataclasses.replace(d, name=name)
    return out



def keep_time_added(want: Sequence[Dict[str, Any]], have: Mapping[str, Mapping[str, Any]]) -> None:
    """Give each taint of *want* (slices about to be written) the ``timeAdded`` the API server gave the
    same taint (key and effect) of the same device in *have* (the slices published, by name): the API
    server stamps a taint written without one with the time of the write, and the eviction controller
    counts a toleration's ``tolerationSeconds`` from it, so a republish for another card must not
    restart that count."""
    added = {(dev.get("name"), t.get("key"), t.get("effect")): t["timeAdded"]
             for s in have.values() for dev in (s.get("spec") or {}).get("devices") or []
             for t in dev.get("taints") or [] if t.get("timeAdded")}
    for s in want:
        for dev in s["spec"].get("devices") or []:
            for t in dev.get("taints") or []:
                when = added.get((dev["name"], t["key"], t["effect"]))
                if when:
                    t["timeAdded"] = when
