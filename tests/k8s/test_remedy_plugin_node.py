"""`xpu-cdi device-plugin --evict` on the real node (issue 43): a card unhealthy past its grace has its
pods evicted through the Eviction API, as the node, with the rights deploy/device-plugin-evict gives.

The plugin runs on the machine in the node's network namespace with the token of its service account
bound to a stand-in pod on the node (what the DaemonSet pod's token is: it names the node).  A card
fails as in the health tests: its device node removed from the fake host.

- policy on: the pod holding the card is evicted within the grace + 5 s (its deletion asked by
  the Eviction API: an Event on the pod and on the node, the count in the status file); the card,
  back, is held Unhealthy for the hold-down, then offered again;
- a PodDisruptionBudget with minAvailable 1 holds the eviction back: the pod stays, an Event on
  it says why; once the budget is gone the retry evicts it;
- policy off (the session's plugin): the card is Unhealthy and back as today, the pod untouched;
- the rights: with the plugin's token, as the node, a pod bound to another node cannot be evicted
  or read (NodeRestriction, the Node authorizer); another node cannot be impersonated; without
  impersonation nothing can be evicted; Events only about its own Node or a Pod, its own reasons.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from support import HANG, fakehost, kubeletkit
from support.dranode import Identity
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import XPU, Cards, DevicePlugin, PodResources

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GRACE, HOLD_DOWN = 2.0, 3.0
OTHER = "xpu-cdi-evict-other-node"


class EvictingPlugin(DevicePlugin):
    """The device plugin with ``--evict``, in the node's network namespace (the API server is there)."""

    def __init__(self, cluster: Cluster, cards: Cards, log_dir: Path, identity: Identity) -> None:
        self.identity = identity
        super().__init__(cluster, cards, log_dir, "--evict", f"{XPU}:grace={GRACE:g},hold-down={HOLD_DOWN:g}",
                         "--kubeconfig", str(identity.kubeconfig), "--node-name", cluster.node_name,
                         "--pod-resources-socket", str(cluster.pod_resources_socket))

    def start(self) -> None:
        self.proc = kubeletkit.PluginProcess("pypi", self.args(), self.log,
                                             prefix=self.cluster.on_node([], mount=False))
        self.cluster.adopt(self.proc.proc.pid)

    def doc(self) -> Dict[str, Any]:
        return json.loads(self.status.read_text()) if self.status.exists() else {}


@pytest.fixture(scope="module")
def plugin_id(node: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    """deploy/serviceaccounts.yaml and deploy/device-plugin-evict applied; the plugin account's token
    bound to a stand-in pod on the node."""
    i = Identity(node, tmp_path_factory.mktemp("dp-id"), sa="xpu-cdi",
                 manifests=(DEPLOY / "serviceaccounts.yaml", DEPLOY / "device-plugin-evict" / "rbac.yaml"))
    try:
        yield i
    finally:
        i.close()


@pytest.fixture(scope="module")
def podres(node: Cluster) -> Iterator[PodResources]:
    pr = PodResources(node)
    yield pr
    pr.close()


@pytest.fixture
def evicting(node: Cluster, cards: Cards, plugin_id: Identity, tmp_path: Path) -> Iterator[EvictingPlugin]:
    p = EvictingPlugin(node, cards, tmp_path, plugin_id)
    try:
        p.wait_served()
        yield p
    finally:
        p.stop()
        node.wait_allocatable(XPU, 0, timeout=60)


def held_card(node: Cluster, podres: PodResources, pods: List[str], prefix: str, **meta: Any) -> str:
    name = nodekit.unique(prefix)
    pods.append(name)
    obj = nodekit.card_pod(name, {XPU: 1})
    obj["metadata"].update(meta)
    nodekit.run_pod(node, obj)
    ids = podres.devices(name, XPU)
    assert len(ids) == 1, ids
    return ids[0]


def deleting(node: Cluster, name: str) -> bool:
    r = node.kubectl("get", "pod", name, "-o", "json", check=False)
    return r.returncode != 0 or bool(json.loads(r.stdout)["metadata"].get("deletionTimestamp"))


def events(node: Cluster, kind: str, name: str, namespace: str = "default") -> List[Dict[str, Any]]:
    got = node.get("events", "-n", namespace, "--field-selector",
                   f"involvedObject.kind={kind},involvedObject.name={name}")
    return [e for e in got["items"] if e.get("source", {}).get("component") == "xpu-cdi-device-plugin"]


def test_unhealthy_card_pod_evicted_within_grace(node: Cluster, evicting: EvictingPlugin, cards: Cards,
                                                 podres: PodResources, pods: List[str]) -> None:
    card = held_card(node, podres, pods, "evicted")
    path = cards.host.path(f"/dev/xpu{card}")
    path.unlink()
    t0 = time.monotonic()
    try:
        node.wait(lambda: deleting(node, pods[0]), GRACE + 5, "the pod evicted within the grace + 5 s")
        took = time.monotonic() - t0
        assert took >= GRACE - 0.5, took  # not before the grace
        (ev,) = node.wait(lambda: [e for e in events(node, "Pod", pods[0]) if e["reason"] == "XpuCdiEvicting"],
                          30, "the Event on the pod")
        assert f"{XPU}={card}" in ev["message"] and ev["involvedObject"].get("uid")
        node.wait(lambda: [e for e in events(node, "Node", node.node_name) if e["reason"] == "XpuCdiCardUnhealthy"
                           and f"{XPU}={card}" in e["message"]], 30, "the Event on the node")
        assert f"{XPU}={card}: evicted pod default/{pods[0]}" in evicting.text()
        counts = node.wait(lambda: evicting.doc().get("remediation", {}).get("pods_evicted"), 10, "the count")
        assert counts == [{"kind": XPU, "reason": "unhealthy", "count": 1}]
        assert evicting.doc()["kinds"][XPU]["evictions"] == {"unhealthy": 1}  # xpu_cdi_evictions_total's
    finally:
        fakehost.mknod(path, fakehost.XPU_MAJOR, int(card))
    back = time.monotonic()
    # healthy again: held down (Unhealthy to kubelet) for the hold-down, then offered
    node.wait(lambda: f"{XPU}={card}: healthy for the hold-down: offered again" in evicting.text(), HOLD_DOWN + 30,
              "the card offered again")
    assert time.monotonic() - back >= HOLD_DOWN - 0.5
    evicting.wait_served()


def test_disruption_budget_holds_the_eviction(node: Cluster, evicting: EvictingPlugin, cards: Cards,
                                              podres: PodResources, pods: List[str]) -> None:
    label = nodekit.unique("pdb")
    card = held_card(node, podres, pods, "budgeted", labels={"xpu-cdi-test": label})
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": label},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"xpu-cdi-test": label}}}}
    node.apply(pdb)
    node.wait(lambda: node.get("pdb", label).get("status", {}).get("expectedPods") == 1, 60, "the budget counted")
    path = cards.host.path(f"/dev/xpu{card}")
    path.unlink()
    try:
        (ev,) = node.wait(lambda: [e for e in events(node, "Pod", pods[0]) if e["reason"] == "XpuCdiEvictionBlocked"],
                          HANG, "the Event saying the eviction is held back")
        assert "disruption budget" in ev["message"], ev
        assert not deleting(node, pods[0])
        blocked = node.wait(lambda: evicting.doc().get("remediation", {}).get("evictions_blocked"), 10, "the count")
        assert blocked[0]["why"] == "disruption-budget", blocked
        node.delete("pdb", label)
        node.wait(lambda: deleting(node, pods[0]), HANG, "the pod evicted once the budget is gone")
    finally:
        node.delete("pdb", label)
        fakehost.mknod(path, fakehost.XPU_MAJOR, int(card))


def test_policy_off_nothing_changes(node: Cluster, plugin: DevicePlugin, cards: Cards, podres: PodResources,
                                    pods: List[str]) -> None:
    """The plugin without --evict (the session's): the card goes Unhealthy and comes back as today,
    at once, and the pod holding it runs on, untouched."""
    card = held_card(node, podres, pods, "kept")
    before = node.pod(pods[0])
    path = cards.host.path(f"/dev/xpu{card}")
    path.unlink()
    try:
        node.wait_allocatable(XPU, 7, timeout=HANG)
    finally:
        fakehost.mknod(path, fakehost.XPU_MAJOR, int(card))
    node.wait_allocatable(XPU, 8, timeout=HANG)
    after = node.pod(pods[0])
    assert not after["metadata"].get("deletionTimestamp") and after["status"]["phase"] == "Running"
    assert after["status"]["containerStatuses"][0]["containerID"] == before["status"]["containerStatuses"][0][
        "containerID"]
    assert events(node, "Pod", pods[0]) == [] and "evict" not in plugin.text().lower()


# ---- the rights -----------------------------------------------------------------------------------

def as_(node: Cluster, who: Identity, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
    return node.run_on_node([str(node.kubectl_bin), "--kubeconfig", str(who.kubeconfig), *args], input=input,
                            mount=False)


def evict_as(node: Cluster, who: Identity, pod: str, as_user: str = "") -> subprocess.CompletedProcess:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "default"}}
    return as_(node, who, *(["--as", as_user] if as_user else []), "create", "--raw",
               f"/api/v1/namespaces/default/pods/{pod}/eviction", "-f", "-", input=json.dumps(body))


@pytest.fixture
def elsewhere(node: Cluster) -> Iterator[str]:
    """A pod bound to another node (none such exists: it stays Pending, no kubelet runs it)."""
    name = nodekit.unique("elsewhere")
    obj = nodekit.pod(name, ["sleep", "1"])
    obj["spec"]["nodeName"] = OTHER
    node.apply(obj)
    try:
        yield name
    finally:
        node.kubectl("delete", "pod", name, "--force", "--grace-period=0", "--ignore-not-found")


def test_may_not_evict_a_pod_of_another_node(node: Cluster, plugin_id: Identity, elsewhere: str) -> None:
    me = f"system:node:{node.node_name}"
    r = evict_as(node, plugin_id, elsewhere, me)
    assert r.returncode != 0 and f"node {node.node_name} can only evict pods with spec.nodeName set to itself" \
        in r.stderr, r.stderr
    r = as_(node, plugin_id, "--as", me, "get", "pod", elsewhere)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    assert not node.pod(elsewhere)["metadata"].get("deletionTimestamp")


def test_may_not_be_another_node_or_evict_as_itself(node: Cluster, plugin_id: Identity, elsewhere: str) -> None:
    r = evict_as(node, plugin_id, elsewhere, f"system:node:{OTHER}")
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    r = evict_as(node, plugin_id, elsewhere)  # its own account: no pods/eviction right
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    for args in (("delete", "pod", elsewhere), ("label", "node", node.node_name, "x=1"),
                 ("get", "secrets", "-n", "kube-system")):  # as the node, nothing but an eviction and a read
        r = as_(node, plugin_id, "--as", f"system:node:{node.node_name}", *args)
        assert r.returncode != 0 and "forbidden" in r.stderr.lower(), (args, r.stderr)
    assert not node.pod(elsewhere)["metadata"].get("deletionTimestamp")


def event(involved: Dict[str, str], reason: str = "XpuCdiEvicting",
          component: str = "xpu-cdi-device-plugin") -> Dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "xpu-cdi-evict-", "namespace": "default"},
            "involvedObject": involved, "reason": reason, "message": "policy test", "type": "Warning",
            "source": {"component": component}}


@pytest.mark.parametrize("case,needle", [
    ("other-node", f"not about Node '{OTHER}'"),
    ("service", "not about Service 'kubernetes'"),
    ("pod-other-namespace", "does not match event.namespace"),  # the API server's own validation
    ("foreign-reason", "its own Events only"),
    ("foreign-component", "its own Events only"),
])
def test_events_refused(node: Cluster, plugin_id: Identity, case: str, needle: str) -> None:
    obj = {"other-node": event({"kind": "Node", "name": OTHER}),
           "service": event({"kind": "Service", "name": "kubernetes", "namespace": "default"}),
           "pod-other-namespace": event({"kind": "Pod", "name": "x", "namespace": "kube-system"}),
           "foreign-reason": event({"kind": "Node", "name": node.node_name}, reason="NodeNotReady"),
           "foreign-component": event({"kind": "Node", "name": node.node_name}, component="kubelet")}[case]
    r = as_(node, plugin_id, "create", "-f", "-", input=json.dumps(obj))
    assert r.returncode != 0 and needle in r.stderr, r.stderr
    assert "ValidatingAdmissionPolicy" in r.stderr or case == "pod-other-namespace", r.stderr


def test_events_allowed(node: Cluster, plugin_id: Identity) -> None:
    for involved in ({"kind": "Node", "name": node.node_name}, {"kind": "Pod", "name": "x", "namespace": "default"}):
        r = as_(node, plugin_id, "create", "-f", "-", input=json.dumps(event(involved)))
        assert r.returncode == 0, r.stderr
        node.kubectl("delete", "-n", "default", r.stdout.split()[0], "--ignore-not-found")
