"""The metric names, and the snapshot they are built from at each scrape.

One set of names for every vendor (docs/monitoring.md lists them); each
per-card series carries the same labels: ``kind``, ``card`` (the CDI device
name), ``uuid``, ``pci_bus_id``, ``model`` where known, and ``namespace``,
``pod``, ``container`` while a container holds the card (an empty label is
no label to Prometheus).  A scrape only formats the snapshot the refresh
loop last made (and the process's own series, from /proc/self): it never
runs a tool or reads a card's file.  :mod:`.exposition` writes the text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .claimdevices import ClaimDevice
from .exposition import Family
from .podresources import Holder
from .sources import Result

CARD_LABELS = ["kind", "card", "uuid", "pci_bus_id", "model", "namespace", "pod", "container"]
# a claim-scoped device (a share of a card, a vNPU): kind and card are its card's where known
CLAIM_LABELS = ["driver", "device", "kind", "card", "share_id", "cdi_device", "claim_namespace", "claim",
                "namespace", "pod", "container"]

# reading -> (metric name, unit, help)
READINGS = {
    "memory_used": ("xpu_cdi_card_memory_used_bytes", "bytes", "Device memory in use, in bytes."),
    "memory_total": ("xpu_cdi_card_memory_total_bytes", "bytes", "Device memory the card has, in bytes."),
    "utilization": ("xpu_cdi_card_utilization_ratio", "ratio",
                    "Share of time the card's compute units were busy, 0 to 1 (the vendor's utilisation)."),
    "temperature": ("xpu_cdi_card_temperature_celsius", "celsius", "The card's temperature in degrees Celsius."),
    "power": ("xpu_cdi_card_power_watts", "watts", "The card's power draw in watts."),
}
HEALTHY = "xpu_cdi_card_healthy"
ALLOCATED = "xpu_cdi_card_allocated"
CLAIM_DEVICE = "xpu_cdi_claim_device"
CLAIM_MEMORY = "xpu_cdi_claim_device_memory_bytes"
SOURCE_UP = "xpu_cdi_exporter_source_up"
SOURCE_DURATION = "xpu_cdi_exporter_source_duration_seconds"
DRIVER_INFO = "xpu_cdi_driver_info"
INTERCONNECT_INFO = "xpu_cdi_card_interconnect_info"
POD_RESOURCES = "pod-resources"  # the source name of kubelet's PodResources API


@dataclass
class CardState:
    """One card as the last refresh saw it."""

    kind: str
    card: str
    healthy: bool
    uuid: str = ""
    pci: str = ""
    model: str = ""
    holder: Optional[Holder] = None
    readings: Dict[str, float] = field(default_factory=dict)

    def labels(self) -> List[str]:
        h = self.holder
        return [self.kind, self.card, self.uuid, self.pci, self.model,
                h.namespace if h else "", h.pod if h else "", h.container if h else ""]


@dataclass
class Snapshot:
    cards: List[CardState] = field(default_factory=list)
    allocation_known: bool = False  # kubelet answered: allocated is 0 or 1, else absent
    sources: List[Result] = field(default_factory=list)
    claim_devices: List[ClaimDevice] = field(default_factory=list)
    drivers: Dict[str, str] = field(default_factory=dict)  # kind -> driver version (the profile's file)
    # (kind, card) -> (its RoCE address, its interconnect domain), where either is known (xpu_cdi.interconnect)
    links: Dict[Tuple[str, str], Tuple[str, str]] = field(default_factory=dict)


def claim_labels(d: ClaimDevice) -> List[str]:
    kind, _, card = d.card.partition("=")
    h = d.holder
    return [d.driver, d.device, kind, card, d.share_id, d.cdi, d.claim_namespace, d.claim,
            h.namespace if h else "", h.pod if h else "", h.container if h else ""]


def families(snap: Snapshot) -> List[Family]:
    """The snapshot's metric families, in the order a scrape lists them (an empty family still has
    its HELP and TYPE)."""
    healthy = Family(HEALTHY, "1 when the card passes the device plugin's health rule (its nodes as the spec "
                              "says, its PCI function present, the driver's state running), else 0.",
                     labels=CARD_LABELS)
    allocated = Family(ALLOCATED, "1 while kubelet has the card assigned to a container (device plugin or DRA "
                                  "claim), else 0; absent when kubelet's PodResources API does not answer.",
                       labels=CARD_LABELS)
    readings = {r: Family(name, doc, labels=CARD_LABELS, unit=unit) for r, (name, unit, doc) in READINGS.items()}
    for c in snap.cards:
        labels = c.labels()
        healthy.add(labels, 1.0 if c.healthy else 0.0)
        if snap.allocation_known:
            allocated.add(labels, 1.0 if c.holder else 0.0)
        for reading, value in c.readings.items():
            readings[reading].add(labels, value)
    claimed = Family(CLAIM_DEVICE, "1 per device a DRA claim prepared here beyond a whole card (a share of a "
                                   "card, a vNPU), with its claim and the container kubelet lists for it.",
                     labels=CLAIM_LABELS)
    claimed_memory = Family(CLAIM_MEMORY, "Memory of the card the claim's device was given (its share; not "
                                          "enforced unless the vendor does), in bytes.",
                            labels=CLAIM_LABELS, unit="bytes")
    for d in snap.claim_devices:
        claimed.add(claim_labels(d), 1.0)
        if d.memory is not None:
            claimed_memory.add(claim_labels(d), float(d.memory))
    up = Family(SOURCE_UP, "1 when the source answered in the last refresh (a vendor tool, a card's files, "
                           "kubelet's PodResources API), else 0.", labels=["source"])
    took = Family(SOURCE_DURATION, "How long the source took in the last refresh, in seconds.", labels=["source"],
                  unit="seconds")
    for r in snap.sources:
        up.add([r.source], 1.0 if r.up else 0.0)
        took.add([r.source], round(r.duration, 6))
    driver = Family(DRIVER_INFO, "1 per kind whose driver reports its version (the profile's driver version file, "
                                 "as semver): a driver upgrade shows here.", labels=["kind", "version"])
    for kind, version in sorted(snap.drivers.items()):
        driver.add([kind, version], 1.0)
    links = Family(INTERCONNECT_INFO, "1 per card whose interconnect facts are known: its RoCE address "
                                      "(Ascend: /etc/hccn.conf) and its interconnect domain (HCCS ring or mesh).",
                   labels=["kind", "card", "device_ip", "hccs_domain"])
    for (kind, card), (ip, domain) in sorted(snap.links.items()):
        links.add([kind, card, ip, domain], 1.0)
    return [healthy, allocated, driver, links, *readings.values(), claimed, claimed_memory, up, took]


class Process:
    """The exporter's own process_* series, as every Prometheus client library names them (CPU,
    memory, start time, file descriptors), read from /proc/self at each scrape."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        try:
            with open(os.path.join(proc, "stat"), "rb") as f:
                self.boot = next(float(ln.split()[1]) for ln in f if ln.startswith(b"btime "))
        except (OSError, StopIteration, ValueError, IndexError):
            self.boot = 0.0  # no usable /proc: no process series

    def families(self) -> List[Family]:
        if not self.boot:
            return []
        me = os.path.join(self.proc, "self")
        out = []
        try:
            with open(os.path.join(me, "stat"), "rb") as f:
                fields = f.read().rsplit(b")", 1)[-1].split()  # after the command, which may hold spaces
        except OSError:
            fields = []
        if fields:
            cpu = Family("process_cpu_seconds", "Total user and system CPU time spent in seconds.", kind="counter")
            cpu.add([], (int(fields[11]) + int(fields[12])) / self.ticks)
            out += [_one("process_virtual_memory_bytes", "Virtual memory size in bytes.", float(fields[20])),
                    _one("process_resident_memory_bytes", "Resident memory size in bytes.",
                         float(int(fields[21]) * self.page)),
                    _one("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                         int(fields[19]) / self.ticks + self.boot),
                    cpu]
        try:
            fds = len(os.listdir(os.path.join(me, "fd")))
        except OSError:
            return out
        out.append(_one("process_open_fds", "Number of open file descriptors.", float(fds)))
        limit = os.sysconf("SC_OPEN_MAX")  # the soft RLIMIT_NOFILE, /proc/self/limits' "Max open files"
        if limit > 0:
            out.append(_one("process_max_fds", "Maximum number of open file descriptors.", float(limit)))
        return out


def _one(name: str, help: str, value: float) -> Family:  # noqa: A002 - the format's word
    f = Family(name, help)
    f.add([], value)
    return f
