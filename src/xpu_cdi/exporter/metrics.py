"""The metric names, and the snapshot they are built from at each scrape.

One set of names for every vendor (docs/monitoring.md lists them); each
per-card series carries the same labels: ``kind``, ``card`` (the CDI device
name), ``uuid``, ``pci_bus_id``, ``model`` where known, and ``namespace``,
``pod``, ``container`` while a container holds the card (an empty label is
no label to Prometheus).  A scrape only formats the snapshot the refresh
loop last made (and the process's own series, prometheus_client's
``ProcessCollector``): it never runs a tool or reads a card's file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .claimdevices import ClaimDevice
from ..node.podresources import Holder
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
EVICTIONS = "xpu_cdi_evictions"  # _total: remediation's evict decisions (exporter/remediation.py)
RESTORES = "xpu_cdi_card_restores"  # _total: its restore decisions
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
    # (action, kind, reason) -> the node daemons' remediation decisions (exporter/remediation.py)
    remedies: Dict[Tuple[str, str, str], float] = field(default_factory=dict)


def claim_labels(d: ClaimDevice) -> List[str]:
    kind, _, card = d.card.partition("=")
    h = d.holder
    return [d.driver, d.device, kind, card, d.share_id, d.cdi, d.claim_namespace, d.claim,
            h.namespace if h else "", h.pod if h else "", h.container if h else ""]


class SnapshotCollector(Collector):
    """A prometheus_client collector over whatever snapshot :attr:`snapshot` holds now (the refresh
    loop swaps it whole); an empty family still has its HELP and TYPE."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def collect(self) -> Iterator[Any]:
        snap = self.snapshot  # one reference for the whole scrape
        healthy = GaugeMetricFamily(HEALTHY, "1 when the card passes the device plugin's health rule (its nodes "
                                             "as the spec says, its PCI function present, the driver's state "
                                             "running), else 0.", labels=CARD_LABELS)
        allocated = GaugeMetricFamily(ALLOCATED, "1 while kubelet has the card assigned to a container (device "
                                                 "plugin or DRA claim), else 0; absent when kubelet's PodResources "
                                                 "API does not answer.", labels=CARD_LABELS)
        readings = {r: GaugeMetricFamily(name, doc, labels=CARD_LABELS, unit=unit)
                    for r, (name, unit, doc) in READINGS.items()}
        for c in snap.cards:
            labels = c.labels()
            healthy.add_metric(labels, 1.0 if c.healthy else 0.0)
            if snap.allocation_known:
                allocated.add_metric(labels, 1.0 if c.holder else 0.0)
            for reading, value in c.readings.items():
                readings[reading].add_metric(labels, value)
        claimed = GaugeMetricFamily(CLAIM_DEVICE, "1 per device a DRA claim prepared here beyond a whole card (a "
                                                  "share of a card, a vNPU), with its claim and the container "
                                                  "kubelet lists for it.", labels=CLAIM_LABELS)
        claimed_memory = GaugeMetricFamily(CLAIM_MEMORY, "Memory of the card the claim's device was given (its "
                                                         "share; not enforced unless the vendor does), in bytes.",
                                           labels=CLAIM_LABELS, unit="bytes")
        for d in snap.claim_devices:
            claimed.add_metric(claim_labels(d), 1.0)
            if d.memory is not None:
                claimed_memory.add_metric(claim_labels(d), float(d.memory))
        up = GaugeMetricFamily(SOURCE_UP, "1 when the source answered in the last refresh (a vendor tool, a "
                                          "card's files, kubelet's PodResources API), else 0.", labels=["source"])
        took = GaugeMetricFamily(SOURCE_DURATION, "How long the source took in the last refresh, in seconds.",
                                 labels=["source"], unit="seconds")
        for r in snap.sources:
            up.add_metric([r.source], 1.0 if r.up else 0.0)
            took.add_metric([r.source], round(r.duration, 6))
        driver = GaugeMetricFamily(DRIVER_INFO, "1 per kind whose driver reports its version (the profile's "
                                                "driver version file, as semver): a driver upgrade shows here.",
                                   labels=["kind", "version"])
        for kind, version in sorted(snap.drivers.items()):
            driver.add_metric([kind, version], 1.0)
        links = GaugeMetricFamily(INTERCONNECT_INFO, "1 per card whose interconnect facts are known: its RoCE "
                                                     "address (Ascend: /etc/hccn.conf) and its interconnect domain "
                                                     "(HCCS ring or mesh).",
                                  labels=["kind", "card", "device_ip", "hccs_domain"])
        for (kind, card), (ip, domain) in sorted(snap.links.items()):
            links.add_metric([kind, card, ip, domain], 1.0)
        evictions = CounterMetricFamily(EVICTIONS, "Cards whose pods the remediation policy evicted (the DRA "
                                                   "driver's NoExecute taint after the grace), by kind and reason.",
                                        labels=["kind", "reason"])
        restores = CounterMetricFamily(RESTORES, "Cards offered again after the remediation policy's hold-down "
                                                 "(reason recovered: after an eviction; held-down: a failure "
                                                 "shorter than the grace), by kind and reason.",
                                       labels=["kind", "reason"])
        for (action, kind, reason), n in sorted(snap.remedies.items()):
            (evictions if action == "evict" else restores).add_metric([kind, reason], n)
        yield healthy
        yield allocated
        yield evictions
        yield restores
        yield driver
        yield links
        yield from readings.values()
        yield claimed
        yield claimed_memory
        yield up
        yield took


def registry(collector: SnapshotCollector) -> CollectorRegistry:
    """The exporter's registry: the snapshot's families and the process_* series (CPU, memory, start
    time, file descriptors, as every client library names them); not the default registry's
    python_* series."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    ProcessCollector(registry=reg)
    return reg
