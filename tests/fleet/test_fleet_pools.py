"""The field reports' practices on the fleet (issue 28, item 4), with deploy/ as a user applies it:
deploy/labels' DaemonSet labels every node with what it has; deploy/'s DaemonSets (specs, device
plugin, exporter) select the nodes it labelled present; a Deployment with a nodeSelector on the
model label lands only in that pool; a namespace's ResourceQuota counts cards across nodes and
refuses the next pod.

deploy/ is applied by conftest.py's fixtures (``labelled``, ``deployed``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest
from support.k8s import nodekit
from support.k8s.fleet import NODES, PRESENT, Fleet

pytestmark = [pytest.mark.privileged]
A, B, C = NODES


def test_each_node_labelled_with_what_it_has(fleet: Fleet, labelled: Path) -> None:
    """The labeller's pod on each node (its token names that node) sets that node's model and count."""
    for spec in NODES:
        cls = "xpu" if spec.profile == "kunlunxin" else "npu"
        want = {PRESENT: "true", f"xpu-cdi.io/{cls}.model": spec.model, f"xpu-cdi.io/{cls}.count": str(spec.cards)}
        fleet.wait(lambda: want.items() <= fleet.labels(spec.name).items(), 60,
                   f"{spec.name} labelled {want}")
    assert "xpu-cdi.io/npu.model" not in fleet.labels(A.name)
    assert "xpu-cdi.io/xpu.model" not in fleet.labels(B.name)


def test_daemonsets_run_on_the_present_nodes_only(fleet: Fleet, deployed: None) -> None:
    """Each node's cards under its kind's resource; with one node's present label gone, the
    exporter's DaemonSet leaves that node (it selects on the label, not on a name)."""
    for spec in NODES:
        assert fleet.nodes[spec.name].allocatable(spec.kind) == spec.cards
    assert fleet.nodes[A.name].allocatable(nodekit.NPU) == 0 and fleet.nodes[B.name].allocatable(nodekit.XPU) == 0
    pods = fleet.get("pods", "-n", "kube-system", "-l", "app.kubernetes.io/name=xpu-cdi-exporter")["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(s.name for s in NODES)


def placed(fleet: Fleet, selector: str) -> Dict[str, List[str]]:
    """The pods of *selector* by the node the scheduler put them on ("Pending": none)."""
    out: Dict[str, List[str]] = {}
    for p in fleet.get("pods", "-l", selector)["items"]:
        out.setdefault(p["spec"].get("nodeName") or "Pending", []).append(p["metadata"]["name"])
    return out


def test_a_deployment_lands_only_in_its_models_pool(fleet: Fleet, deployed: None) -> None:
    """Five replicas of one NPU each, nodeSelector on the 310P model label: four run on node B
    (its four cards), the fifth stays Pending although node C has eight NPUs free."""
    name = nodekit.unique("infer")
    container = {"name": "c", "image": nodekit.BUSYBOX, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", "exec sleep 2147483647"], "resources": {"limits": {nodekit.NPU: "1"}}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                  "spec": {"replicas": 5, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}},
                                        "spec": {"nodeSelector": {"xpu-cdi.io/npu.model": "Ascend310P"},
                                                 "terminationGracePeriodSeconds": 1, "containers": [container]}}}}
    fleet.apply(deployment)
    try:
        got = fleet.wait(lambda: (lambda s: s if len(s.get(B.name, [])) == 4 and len(s.get("Pending", [])) == 1
                                  else None)(placed(fleet, f"app={name}")), 180,
                         "four replicas running on B, one Pending")
        assert set(got) == {B.name, "Pending"}, got
        (pending,) = got["Pending"]
        events = fleet.kubectl("get", "events", "--field-selector", f"involvedObject.name={pending}",
                               "-o", "json").stdout
        messages = " ".join(e.get("message", "") for e in json.loads(events)["items"])
        assert "Insufficient huawei.com/npu" in messages and "node affinity/selector" in messages, messages
    finally:
        fleet.kubectl("delete", "deployment", name, "--wait=true", timeout=180)
        fleet.wait(lambda: not fleet.get("pods", "-l", f"app={name}")["items"], 180, "the replicas gone")


def test_a_quota_counts_cards_across_nodes(fleet: Fleet, deployed: None) -> None:
    """requests.huawei.com/npu: 6 in one namespace: 4 on node B and 2 on node C fill it; the next
    pod, whichever node could take it, is refused at admission."""
    ns = nodekit.unique("team")
    fleet.kubectl("create", "namespace", ns)
    try:
        fleet.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "npus", "namespace": ns},
                     "spec": {"hard": {f"requests.{nodekit.NPU}": "6"}}})
        fleet.wait(lambda: fleet.get("resourcequota", "npus", "-n", ns).get("status", {}).get("hard"), 60,
                   "the quota's status")
        fleet.wait(lambda: fleet.kubectl("get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0,
                   60, "the namespace's service account")
        for node, count in ((B, 4), (C, 2)):
            pod = nodekit.pod(f"on-{node.name}", ["sh", "-c", "exec sleep 2147483647"], {nodekit.NPU: count})
            pod["metadata"]["namespace"] = ns
            pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
            fleet.apply(pod)
        for node in (B, C):
            fleet.control.wait_pod_phase(f"on-{node.name}", "Running", 180, namespace=ns)
        used = fleet.wait(lambda: fleet.get("resourcequota", "npus", "-n", ns)["status"].get("used", {})
                          .get(f"requests.{nodekit.NPU}") == "6", 60, "the quota used 6")
        assert used
        extra = nodekit.pod("one-more", ["sh", "-c", "exec sleep 2147483647"], {nodekit.NPU: 1})
        extra["metadata"]["namespace"] = ns
        r = fleet.kubectl("apply", "-f", "-", input=json.dumps(extra), check=False)
        assert r.returncode != 0 and "exceeded quota: npus" in r.stderr, r.stderr
        assert f"requested: requests.{nodekit.NPU}=1, used: requests.{nodekit.NPU}=6, limited: " \
               f"requests.{nodekit.NPU}=6" in r.stderr, r.stderr
    finally:
        fleet.kubectl("delete", "namespace", ns, "--wait=true", timeout=300)


def test_preemption_frees_a_card_on_the_right_node(fleet: Fleet, deployed: None) -> None:
    """Node B's four NPUs held by low-priority pods, node C's held too (2 low pods of 4); a
    high-priority pod for the 310P pool preempts one of B's pods -- not one of C's -- and runs on B."""
    suffix = nodekit.unique("p")
    classes = {"low": 10, "high": 1000}
    for cls, value in classes.items():
        fleet.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": f"{cls}-{suffix}"}, "value": value})
    names: List[str] = []

    def pod(name: str, cls: str, node: str, cards: int) -> Dict[str, object]:
        p = nodekit.pod(name, ["sh", "-c", "exec sleep 2147483647"], {nodekit.NPU: cards})
        p["spec"].update(hostNetwork=False, priorityClassName=f"{cls}-{suffix}",
                         nodeSelector={"kubernetes.io/hostname": node})
        names.append(name)
        return p

    try:
        low_b = [f"low-b{i}-{suffix}" for i in range(4)]
        low_c = [f"low-c{i}-{suffix}" for i in range(2)]
        fleet.apply(*[pod(n, "low", B.name, 1) for n in low_b], *[pod(n, "low", C.name, 4) for n in low_c])
        for n in low_b + low_c:
            fleet.control.wait_pod_phase(n, "Running", 180)
        high = f"high-{suffix}"
        p = pod(high, "high", B.name, 1)
        p["spec"]["nodeSelector"] = {"xpu-cdi.io/npu.model": "Ascend310P"}
        fleet.apply(p)
        running = fleet.control.wait_pod_phase(high, "Running", 240)
        assert running["spec"]["nodeName"] == B.name
        left = {q["metadata"]["name"] for q in fleet.get("pods")["items"]
                if q["metadata"]["name"] in low_b + low_c and not q["metadata"].get("deletionTimestamp")}
        assert set(low_c) <= left and len(set(low_b) - left) == 1, left
    finally:
        if names:
            nodekit.wait_gone(fleet.control, *names)
        for cls in classes:
            fleet.kubectl("delete", "priorityclass", f"{cls}-{suffix}", "--ignore-not-found")
