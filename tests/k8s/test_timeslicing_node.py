"""Time-slicing replicas (``sharing.timeSlicing``) on the real kubelet: the node's allocatable,
pods sharing one card, and kubelet's admission failing a request the plugin refuses."""

from __future__ import annotations

from typing import Dict, Iterator, List

import pytest
import yaml

from support import fakehost
from support import matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin, PodResources
from xpu_cdi.node import sharing

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
REPLICAS = 4


@pytest.fixture(scope="module")
def podres(cluster: Cluster) -> Iterator[PodResources]:
    pr = PodResources(cluster)
    yield pr
    pr.close()


@pytest.fixture(scope="module")
def plugin(cluster: Cluster, cards: Cards, podres: PodResources,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevicePlugin]:
    """The plugin with 4 replicas per card and failRequestsGreaterThanOne, from its config file."""
    base = tmp_path_factory.mktemp("dp")
    cfg = base / "device-plugin.yaml"
    cfg.write_text(yaml.safe_dump({"sharing": {"timeSlicing": {
        "failRequestsGreaterThanOne": True, "resources": [{"name": XPU, "replicas": REPLICAS}]}}}))
    p = DevicePlugin(cluster, cards, base, "--config", str(cfg))
    want = sorted(sharing.replica_ids(map(str, cards.host.cards), REPLICAS))
    try:
        cluster.wait(lambda: sorted(podres.allocatable(XPU)) == want, 60, f"kubelet holding {len(want)} replicas")
        cluster.wait_allocatable(XPU, len(want), 60)
        yield p
    finally:
        p.stop()
        cluster.wait_allocatable(XPU, 0, timeout=60)


def test_allocatable_is_cards_times_replicas(cluster: Cluster, cards: Cards, plugin: DevicePlugin) -> None:
    """8 cards, replicas: 4: capacity and allocatable 32."""
    assert cards.count == 8
    assert cluster.capacity(XPU) == 8 * REPLICAS and cluster.allocatable(XPU) == 8 * REPLICAS


def test_four_pods_share_one_card(cluster: Cluster, cards: Cards, plugin: DevicePlugin, podres: PodResources,
                                  pods: List[str]) -> None:
    """Every card but 3 reported in ERROR by the driver (their nodes stay): four pods of one replica each
    run on card 3, each sees /dev/xpu3 usable (ENXIO) and no other card; kubelet names four distinct
    replicas of card 3."""
    states = [cards.host.path(f"/proc/xpu/dev{i}/state") for i in cards.host.cards if i != 3]
    try:
        for state in states:
            fakehost.write(state, "ERROR\n")
        cluster.wait_allocatable(XPU, REPLICAS, 30)
        outs: Dict[str, str] = {}
        for n in range(REPLICAS):
            name = nodekit.unique(f"ts{n}")
            pods.append(name)
            outs[name] = nodekit.run_card_pod(cluster, name, {XPU: 1})
        held = [podres.devices(name, XPU) for name in pods]
        assert sorted(i for ids in held for i in ids) == sharing.replica_ids(["3"], REPLICAS), held
        for out in outs.values():
            matrix.check_cards(out, [3])
    finally:
        for state in states:
            state.unlink(missing_ok=True)
    cluster.wait_allocatable(XPU, 8 * REPLICAS, 30)  # Healthy again: allocatable counts healthy, not free


def test_request_for_two_fails_admission(cluster: Cluster, plugin: DevicePlugin, pods: List[str]) -> None:
    """failRequestsGreaterThanOne: a pod asking for 2 is failed by kubelet's admission with the plugin's line."""
    name = nodekit.unique("two")
    pods.append(name)
    cluster.apply(nodekit.card_pod(name, {XPU: 2}))

    def failed() -> Dict:
        status = cluster.pod(name)["status"]
        return status if status.get("phase") == "Failed" else {}

    status = cluster.wait(failed, 60, "kubelet failing the pod's admission")
    assert status.get("reason") == "UnexpectedAdmissionError", status
    assert f"request for '{XPU}: 2' too large" in status.get("message", ""), status

