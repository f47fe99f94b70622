"""deploy/ against a real API server: every manifest passes the server's own validation and
admission (``kubectl apply --server-side --dry-run=server``: unknown fields, schema, defaulting,
the admission plugins, nothing stored), the kustomization too; RuntimeClass ``xpu`` applied for
real schedules pods to the labelled node and runs them through the wrapper."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import yaml

from support import matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import Cards

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"
MANIFESTS = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
LABEL = "xpu-cdi.io/runtime-xpu"


def objects(name: str) -> List[Dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


@pytest.mark.parametrize("name", MANIFESTS)
def test_server_side_dry_run(cluster: Cluster, name: str) -> None:
    """The server validates and admits every object of the file; none is stored."""
    r = cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=(DEPLOY / name).read_text())
    for obj in objects(name):
        shown = f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}" if "/" in obj["apiVersion"] \
            else obj["kind"].lower()
        assert f"{shown}/{obj['metadata']['name']} serverside-applied (server dry run)" in r.stdout, r.stdout
        ns = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
        got = cluster.kubectl("get", obj["kind"], obj["metadata"]["name"], *ns, check=False)
        assert got.returncode != 0 or obj["kind"] == "RuntimeClass", f"{name}: dry run stored {obj['kind']}"


def test_kustomization_dry_run(cluster: Cluster) -> None:
    """`kubectl apply -k deploy/` (kubectl's own kustomize), dry run on the server: every object."""
    r = cluster.kubectl("apply", "-k", str(DEPLOY), "--server-side", "--dry-run=server")
    count = sum(len(objects(n)) for n in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert r.stdout.count("(server dry run)") == count, r.stdout


def test_dry_run_refuses_what_is_wrong(cluster: Cluster) -> None:
    """The check can fail: a field the API does not have is refused, naming it."""
    (ds,) = objects("daemonset.yaml")
    ds["spec"]["template"]["spec"]["containers"][0]["privilegedd"] = True
    r = cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=json.dumps(ds), check=False)
    assert r.returncode != 0 and "privilegedd" in r.stderr, r.stderr


@pytest.fixture
def runtimeclass(cluster: Cluster) -> Iterator[str]:
    """deploy/runtimeclass.yaml applied for real; the node labelled as its comment says (both undone
    after: the label would stay in the later modules' view of the node's xpu-cdi.io/ labels)."""
    cluster.kubectl("label", "node", cluster.node_name, f"{LABEL}=true", "--overwrite")
    cluster.kubectl("apply", "--server-side", "-f", str(DEPLOY / "runtimeclass.yaml"))
    try:
        yield "xpu"
    finally:  # cluster-scoped: the chart's tests install their own
        cluster.kubectl("delete", "runtimeclass", "xpu", "--ignore-not-found", "--wait=true", check=False)
        cluster.kubectl("label", "node", cluster.node_name, f"{LABEL}-", check=False)


def sandbox_handler(cluster: Cluster, pod: str) -> str:
    """The runtime handler containerd's CRI ran *pod*'s sandbox with."""
    for cid in cluster.ctr("containers", "ls", "-q").stdout.split():
        info = json.loads(cluster.ctr("containers", "info", cid).stdout)
        ext = info.get("Extensions", {}).get("io.cri-containerd.sandbox.metadata")
        if ext and info.get("Labels", {}).get("io.kubernetes.pod.name") == pod:
            return json.loads(base64.b64decode(ext["value"]))["Metadata"]["RuntimeHandler"]
    raise AssertionError(f"no sandbox of pod {pod}")


def test_runtimeclass_xpu_runs_the_wrapper(cluster: Cluster, cards: Cards, runtimeclass: str,
                                           pods: List[str]) -> None:
    """A pod naming RuntimeClass xpu gets the class's node selector, runs with containerd's xpu
    handler, and the wrapper is what serves it: the selection variable in the pod spec selects
    cards there (containerd's own CDI reads no env), and not in the same pod without the class."""
    name = nodekit.unique("rc")
    pods.append(name)
    out = nodekit.run_card_pod(cluster, name, runtime_class=runtimeclass, env={matrix.selection_env(): "3"})
    matrix.check_cards(out, [3])
    assert cluster.pod(name)["spec"]["nodeSelector"] == {LABEL: "true"}
    assert sandbox_handler(cluster, name) == "xpu"
    plain = nodekit.unique("plain")
    pods.append(plain)
    matrix.check_cards(nodekit.run_card_pod(cluster, plain, env={matrix.selection_env(): "3"}), [])
    assert sandbox_handler(cluster, plain) == ""


def test_runtimeclass_node_selector_is_honoured(cluster: Cluster, runtimeclass: str, pods: List[str]) -> None:
    """Without the node label no node has the handler: the pod is not scheduled."""
    cluster.kubectl("label", "node", cluster.node_name, f"{LABEL}-")
    try:
        name = nodekit.unique("unlabelled")
        pods.append(name)
        cluster.apply(nodekit.card_pod(name, runtime_class=runtimeclass))
        cond = cluster.wait(lambda: next((c for c in cluster.pod(name)["status"].get("conditions", [])
                                          if c.get("reason") == "Unschedulable"), None), 60, "unschedulable")
        assert "node affinity/selector" in cond["message"] or "didn't match" in cond["message"], cond
    finally:
        cluster.kubectl("label", "node", cluster.node_name, f"{LABEL}=true", "--overwrite")
