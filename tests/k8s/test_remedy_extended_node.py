"""The upstream gap of issue 43 (kubernetes#141290): a pod whose claim was made through a DeviceClass's
``extendedResourceName`` (it asks ``limits: {kunlunxin.com/xpu: 1}`` on a node the DRA driver serves)
is not evicted by a ``NoExecute`` device taint.  The device plugin's evictor covers it: the real
kubelet's PodResources ``List`` names the pod's special claim with the card's CDI name (read here
with the evictor's own client and matched by :func:`xpu_cdi.deviceplugin.evict.holders`), and the
evictor, with the device plugin's pod-bound token acting as the node, evicts that pod through the
Eviction API on the real API server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

from support.dranode import DraDriver, Identity
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU
from xpu_cdi.deviceplugin import evict
from xpu_cdi.node.podresources import Client

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

#: run in the node's network namespace (the API server is there): the evictor for one card, one pass
EVICT_ONCE = """
import json, sys
from xpu_cdi.deviceplugin import evict
from xpu_cdi.node.podresources import Client
kubeconfig, node, socket, kind, card = sys.argv[1:]
api, as_node = evict.node_kube(kubeconfig, node)
lines = []
client = Client(socket)
e = evict.Evictor(node, lambda line, level=0: lines.append(line), client.listed, api, as_node)
e.evict(evict.Card(kind, card, kind), "unhealthy")
e.step()
client.close()
print(json.dumps({"status": e.status(), "lines": lines}))
"""


@pytest.fixture(scope="module")
def plugin_id(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    i = Identity(node, tmp_path_factory.mktemp("dp-id"), sa="xpu-cdi",
                 manifests=(DEPLOY / "serviceaccounts.yaml", DEPLOY / "device-plugin-evict" / "rbac.yaml"))
    try:
        yield i
    finally:
        i.close()


def test_extended_resource_claim_found_and_evicted(cluster: Cluster, driver: DraDriver, plugin_id: Identity,
                                                   pods: List[str]) -> None:
    name = nodekit.unique("ext-evict")
    pods.append(name)
    nodekit.run_card_pod(cluster, name, {XPU: 1})
    status = cluster.pod(name)["status"]["extendedResourceClaimStatus"]
    claim = cluster.get("resourceclaim", status["resourceClaimName"])
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    card = str(result["device"])
    client = Client(str(cluster.pod_resources_socket))
    try:
        listed = client.listed()
    finally:
        client.close()
    assert evict.holders(listed, evict.Card(XPU, card, XPU)) == [evict.Pod("default", name)]
    assert all(evict.holders(listed, evict.Card(XPU, other, XPU)) == [] for other in map(str, range(8))
               if other != card)
    r = cluster.run_on_node([sys.executable, "-c", EVICT_ONCE, str(plugin_id.kubeconfig), cluster.node_name,
                             str(cluster.pod_resources_socket), XPU, card], mount=False, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"]["pods_evicted"] == [{"kind": XPU, "reason": "unhealthy", "count": 1}], out
    cluster.wait(lambda: (lambda p: p.returncode != 0 or bool(json.loads(p.stdout)["metadata"].get(
        "deletionTimestamp")))(cluster.kubectl("get", "pod", name, "-o", "json", check=False)), 60,
        "the pod evicted")
