"""Capacity-shared cards on the real node: `xpu-cdi dra-driver --share-capacity` publishes the
fake host's 8 P800s with allowMultipleAllocations and 96Gi of memory in steps of 32Gi; the real
scheduler (DRAConsumableCapacity, on by default in 1.37) places claims of a third of a card,
kubelet prepares them through the driver, containerd starts the pods from the static card's CDI
name and the claim's own spec.  `xpu-cdi exporter` reads the driver's checkpoint and labels each
share with the pod kubelet's PodResources API lists for it."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import matrix
from support.dranode import DRIVER, DraDriver, claim_template, doctor, pod_claim, with_claim
from support.exporternode import ExporterProcess, on_node
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import Cards, PodResources
from xpu_cdi.node import claimspec

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
GI = 1 << 30
DRIVER_ARGS = ("--share-capacity", "kunlunxin.com/xpu:default=32Gi,step=32Gi,memory=96Gi")  # conftest's driver
OWN = claimspec.kind(DRIVER)
ENV = r"^XPU_CDI_MEMORY_(LIMIT|TOTAL)_(\d+)=(\d+)$"


@pytest.fixture(scope="module")
def exporter(node: Cluster, cards: Cards, driver: DraDriver,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExporterProcess]:
    p = on_node(node, cards, tmp_path_factory.mktemp("exporter"), "--dra-plugins-dir", str(node.plugins_dir),
                "--boot-id-file", str(driver.boot_id))
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log.read_text()


def share_pod(name: str, template: str) -> Dict[str, Any]:
    """A pod printing the cards it sees and the share it was told, then staying up."""
    obj = nodekit.pod(name, ["sh", "-c", f"{matrix.SCRIPT}; env | grep ^XPU_CDI_ | sort; echo {nodekit.DONE}; "
                                         f"exec sleep 2147483647"])
    return with_claim(obj, template)


def card_of(cluster: Cluster, pod: str) -> int:
    (r,) = pod_claim(cluster, pod)["status"]["allocation"]["devices"]["results"]
    assert r["driver"] == DRIVER and r.get("shareID") and r["consumedCapacity"] == {"memory": "32Gi"}, r
    return int(r["device"])


def claim_cdi_names(cluster: Cluster) -> Dict[str, str]:
    """kubelet's PodResources: claim-scoped CDI name -> the pod whose container holds it."""
    podres = PodResources(cluster)
    try:
        resp = podres.stub.List(podres.pb2.ListPodResourcesRequest(), timeout=10)
    finally:
        podres.close()
    return {cdi.name: p.name for p in resp.pod_resources for c in p.containers for dyn in c.dynamic_resources
            for res in dyn.claim_resources for cdi in res.cdi_devices if cdi.name.startswith(OWN + "=")}


def exported(exporter: ExporterProcess) -> Dict[str, Any]:
    """cdi_device -> (labels, memory) of the exporter's claim-device series."""
    with urllib.request.urlopen(exporter.url(), timeout=5) as r:
        body = r.read().decode()
    memory = {}
    info = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == "xpu_cdi_claim_device":
                info[s.labels["cdi_device"]] = s.labels
            elif s.name == "xpu_cdi_claim_device_memory_bytes":
                memory[s.labels["cdi_device"]] = s.value
    return {k: (v, memory.get(k)) for k, v in info.items()}


def test_slices_offer_shares(driver: DraDriver) -> None:
    """Every card: allowMultipleAllocations, memory 96Gi, default 32Gi in steps of 32Gi, as the API
    server stored it."""
    for name, dev in driver.devices().items():
        assert dev.get("allowMultipleAllocations") is True, dev
        assert dev["capacity"]["memory"] == {"value": "96Gi", "requestPolicy": {
            "default": "32Gi", "validRange": {"min": "32Gi", "step": "32Gi"}}}, dev


def test_three_thirds_share_a_card_a_fourth_takes_another(node: Cluster, driver: DraDriver, cards: Cards,
                                                          exporter: ExporterProcess, pods: List[str],
                                                          tmp_path: Path) -> None:
    """Three claims of 32Gi run on one card (each container sees that card usable and its share,
    each its own claim-scoped spec); a fourth lands on another card.  The exporter's series of each
    share names the pod kubelet's PodResources lists for its CDI name; doctor finds the 4 specs held.
    After the pods go, no claim-scoped spec and no prepared claim remain."""
    tmpl = claim_template(node, {"capacity": {"requests": {"memory": "32Gi"}}})
    try:
        outs, on = {}, {}  # pod -> its output, its card
        for n in range(4):
            name = nodekit.unique(f"share{n}")
            pods.append(name)
            outs[name] = nodekit.run_pod(node, share_pod(name, tmpl))
            on[name] = card_of(node, name)
        first = pods[:3]
        shared = {on[p] for p in first}
        assert len(shared) == 1, on
        (card,) = shared
        assert on[pods[3]] != card, on
        for p in pods:
            matrix.check_cards(outs[p], [on[p]])
            told = {(m[0], int(m[1])): int(m[2]) for m in re.findall(ENV, outs[p], re.M)}
            assert told == {("LIMIT", on[p]): 32 * GI, ("TOTAL", on[p]): 96 * GI}, outs[p]
        specs = claimspec.listed(str(node.cdi_dir), DRIVER)
        uids = {p: pod_claim(node, p)["metadata"]["uid"] for p in pods}
        assert sorted(specs) == sorted(uids.values()), specs
        for p in pods:
            spec = json.loads(open(specs[uids[p]]).read())
            (dev,) = spec["devices"]
            assert dev["containerEdits"]["env"][0] == f"XPU_CDI_MEMORY_LIMIT_{on[p]}={32 * GI}", spec
        held = claim_cdi_names(node)
        assert sorted(held.values()) == sorted(pods), held

        def agree() -> Any:
            got = exported(exporter)
            ok = {cdi: (labels["pod"], labels["card"], mem) for cdi, (labels, mem) in got.items()}
            want = {cdi: (pod, str(on[pod]), float(32 * GI)) for cdi, pod in held.items()}
            return got if ok == want else None
        got = node.wait(agree, 30, "the exporter's share series matching kubelet's PodResources")
        assert len({labels["share_id"] for labels, _m in got.values()}) == 4, got
        checks = doctor(node, driver, cards, tmp_path / "none.json")
        (specs_ok,) = checks["dra-claim-specs"]
        assert specs_ok["status"] == "ok" and specs_ok["found"].startswith("4 claim-scoped spec(s)"), specs_ok
    finally:
        nodekit.wait_gone(node, *pods)
        pods.clear()
        node.kubectl("delete", "resourceclaimtemplate", tmpl, "--ignore-not-found")
    node.wait(lambda: not claimspec.listed(str(node.cdi_dir), DRIVER) and not driver.checkpoint(), 60,
              "no claim-scoped spec and no prepared claim left")
    node.wait(lambda: not exported(exporter), 30, "the shares' series gone from the scrape")
