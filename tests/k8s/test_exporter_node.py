"""`xpu-cdi exporter` on the cluster's node: the holder of each card read from the real kubelet's
PodResources API (``<kubelet root>/pod-resources/kubelet.sock``), while `xpu-cdi device-plugin`
serves the fake host's 8 cards to that kubelet and the real scheduler places pods on them; on
the pinned kubelet and on the older one (KUBELETS, conftest.py's node).

Scrapes go over HTTP to the daemon and are parsed with prometheus_client's own text parser."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import HANG
from support.dranode import CLASS, DRIVER, DraDriver
from support.exporternode import ExporterProcess, on_node
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin, PodResources

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
REPO = Path(__file__).resolve().parent.parent.parent
KUBELETS = ("kubernetes", "kubelet-compat")  # the session's kubelet and the older one (conftest.py)

#: card -> its xpu_cdi_card_allocated series' (value, namespace, pod, container)
Allocation = Dict[str, Tuple[float, str, str, str]]


@pytest.fixture(scope="module")
def exporter(node: Cluster, cards: Cards, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterProcess]:
    """The exporter on the machine, reading the node's specs and asking the node's kubelet every second."""
    p = on_node(node, cards, tmp_path_factory.mktemp("exporter"))
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log.read_text()


def allocation(exporter: ExporterProcess) -> Allocation:
    with urllib.request.urlopen(exporter.url(), timeout=HANG) as r:
        body = r.read().decode()
    out: Allocation = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == "xpu_cdi_card_allocated" and s.labels["kind"] == XPU:
                assert s.labels["card"] not in out, body  # one series per card
                out[s.labels["card"]] = (s.value, s.labels["namespace"], s.labels["pod"], s.labels["container"])
    return out


def test_pod_holding_two_cards(node: Cluster, plugin: DevicePlugin, exporter: ExporterProcess) -> None:
    """A pod with limits 2: allocated 1 with its namespace, pod and container on exactly the 2 cards
    kubelet gave it (kubelet's PodResources says which), 0 and no holder on the 6 others; the pod
    deleted: all 8 at 0, its labels gone."""
    free: Allocation = {str(i): (0.0, "", "", "") for i in range(8)}
    node.wait(lambda: allocation(exporter) == free, 30, "8 free cards in the scrape")
    name = nodekit.unique("held")
    try:
        nodekit.run_card_pod(node, name, {XPU: 2})
        podres = PodResources(node)
        try:
            held = podres.devices(name, XPU)
        finally:
            podres.close()
        assert len(held) == 2, held
        want = {**free, **{card: (1.0, "default", name, "c") for card in held}}
        last = node.wait(lambda: (lambda a: a if a == want else None)(allocation(exporter)), 30,
                         f"cards {held} held by default/{name}/c in the scrape")
        assert sum(v for v, *_ in last.values()) == 2
    finally:
        nodekit.wait_gone(node, name)
    node.wait(lambda: allocation(exporter) == free, 30, "the pod's labels gone from the scrape")


def test_dra_claim_of_two_cards(node: Cluster, driver: DraDriver, exporter: ExporterProcess) -> None:
    """A ResourceClaim of 2 cards (deploy/dra's DeviceClass) in a pod's container, prepared by
    `xpu-cdi dra-driver`: allocated 1 with the pod's labels on exactly the 2 the scheduler
    allocated (the claim's status says which), 0 on the others; pod and claim deleted: all free.

    kubelet 1.37's PodResources repeats in each device of a claim the CDI names of the devices
    listed before it (a slice shared across its loop): the exporter reads the names, each
    card counted once."""
    free: Allocation = {str(i): (0.0, "", "", "") for i in range(8)}
    node.wait(lambda: allocation(exporter) == free, 30, "8 free cards in the scrape")
    name = nodekit.unique("claimer")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
             "spec": {"devices": {"requests": [{"name": "two", "exactly": {"deviceClassName": CLASS, "count": 2}}]}}}
    pod: Dict[str, Any] = nodekit.card_pod(name)
    pod["spec"]["resourceClaims"] = [{"name": "cards", "resourceClaimName": name}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cards"}]}
    try:
        node.apply(claim)
        node.apply(pod)
        node.wait_pod_phase(name)
        results = node.get("resourceclaim", name)["status"]["allocation"]["devices"]["results"]
        held: List[str] = sorted(r["device"] for r in results if r["driver"] == DRIVER)
        assert len(held) == 2, results
        want = {**free, **{card: (1.0, "default", name, "c") for card in held}}
        node.wait(lambda: (lambda a: a if a == want else None)(allocation(exporter)), 30,
                  f"cards {held} held by default/{name}/c in the scrape")
    finally:
        nodekit.wait_gone(node, name)
        node.delete("resourceclaim", name)
    node.wait(lambda: allocation(exporter) == free, 30, "the claim's labels gone from the scrape")
