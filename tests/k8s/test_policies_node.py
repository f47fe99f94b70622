"""Every admission policy we ship, against the session cluster's real API server: what a token of
ours may change is named, the rest refused (issue 41).

The tokens are the real ones: each service account's token bound to a stand-in pod on the node
(what the DaemonSet pod's token is: it carries the authentication.kubernetes.io/node-name extra the
policies read), used by kubectl in the node's network namespace.  Each refused change is made by
hand, as a compromised pod would; the change the daemon makes is shown still allowed.

- deploy/labels: the labeller patches its own Node's xpu-cdi.io/ labels, nothing else of it: not an
  ownerReference (the garbage collector deleted the Node when its owner was missing), not a
  finalizer (the Node's deletion held), not annotations, other labels, taints, the spec.
- deploy/dra: the driver writes ResourceSlices of its own node only (node name, pool name, one of
  our drivers, owned by its Node only, no finalizer, no labels added; so it taints only its own
  node's cards), Events about its own Node, and about a Pod only a remediation decision naming its
  node as the source; it can neither evict nor delete a pod, nor make a DeviceTaintRule.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest

from support.dranode import Identity
from support.k8s import nodekit
from support.k8s.cluster import Cluster

pytestmark = [pytest.mark.privileged]
LABELS = Path(__file__).resolve().parents[2] / "deploy" / "labels"
OTHER = "xpu-cdi-policy-other-node"


@pytest.fixture(scope="module")
def labeller(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    i = Identity(cluster, tmp_path_factory.mktemp("labeller-id"), manifests=(LABELS / "rbac.yaml",),
                 sa="xpu-cdi-labeller")
    try:
        yield i
    finally:
        i.close()


@pytest.fixture(scope="module")
def driver(identity: Identity) -> Identity:
    """The DRA driver's credentials (deploy/dra's service account): tests/k8s/conftest.py's."""
    return identity


def as_(cluster: Cluster, who: Identity, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
    return cluster.run_on_node([str(cluster.kubectl_bin), "--kubeconfig", str(who.kubeconfig), *args],
                               input=input, mount=False)


def refused(r: subprocess.CompletedProcess, *needles: str) -> None:
    """*r* was refused by one of our ValidatingAdmissionPolicies, its message naming *needles*."""
    assert r.returncode != 0, f"allowed: {r.stdout}"
    assert "ValidatingAdmissionPolicy" in r.stderr and "xpu-cdi-" in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


def patch_node(cluster: Cluster, who: Identity, patch: Any, kind: str = "merge") -> subprocess.CompletedProcess:
    return as_(cluster, who, "patch", "node", cluster.node_name, "--type", kind, "-p", json.dumps(patch))


# ---- the labeller ---------------------------------------------------------------------------------

@pytest.fixture
def node_restored(cluster: Cluster) -> Iterator[Dict[str, Any]]:
    """The Node before the test; after it, anything a wrongly allowed change left is taken off as admin
    (an ownerReference to a live owner, so that not even a regression lets the collector delete it)."""
    before = cluster.node()
    yield before
    after = cluster.node()
    meta = after["metadata"]
    fix: Dict[str, Any] = {}
    for key in ("ownerReferences", "finalizers"):
        if meta.get(key) != before["metadata"].get(key):
            fix.setdefault("metadata", {})[key] = before["metadata"].get(key)
    if after["spec"] != before["spec"]:
        fix["spec"] = {"taints": before["spec"].get("taints"), "unschedulable": before["spec"].get("unschedulable")}
    if fix:
        cluster.kubectl("patch", "node", cluster.node_name, "--type", "merge", "-p", json.dumps(fix))
    cluster.kubectl("label", "node", cluster.node_name, "xpu-cdi.io/xpu.policy-probe-", "team-", check=False)
    cluster.kubectl("annotate", "node", cluster.node_name, "policy-probe-", check=False)
    assert fix == {}, f"a refused change was stored: {fix}"


def test_labeller_refused_an_owner_reference(cluster: Cluster, labeller: Identity,
                                             node_restored: Dict[str, Any]) -> None:
    """An ownerReference on its own Node: refused (to a missing owner the collector deleted the Node)."""
    owner = cluster.get("clusterrole", "xpu-cdi-labeller")  # a live owner: a regression must not cost the Node
    ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"]}
    refused(patch_node(cluster, labeller, {"metadata": {"ownerReferences": [ref]}}),
            "may change only the node's xpu-cdi.io/ labels, not metadata.ownerReferences")
    refused(patch_node(cluster, labeller, {"metadata": {"ownerReferences": [ref],
                                                        "labels": {"xpu-cdi.io/xpu.policy-probe": "1"}}}),
            "not metadata.ownerReferences")  # not smuggled beside a label it may set
    assert not cluster.node()["metadata"].get("ownerReferences")


def test_labeller_refused_a_finalizer(cluster: Cluster, labeller: Identity, node_restored: Dict[str, Any]) -> None:
    refused(patch_node(cluster, labeller, {"metadata": {"finalizers": ["xpu-cdi.io/hold"]}}),
            "not metadata.finalizers")
    assert not cluster.node()["metadata"].get("finalizers")


@pytest.mark.parametrize("patch,field", [
    ({"spec": {"taints": [{"key": "xpu-cdi.io/x", "effect": "NoSchedule"}]}}, "not spec"),
    ({"spec": {"unschedulable": True}}, "not spec"),  # a cordon
    ({"metadata": {"annotations": {"policy-probe": "1"}}}, "not metadata.annotations"),
    ({"metadata": {"generateName": "x-"}}, "not metadata.generateName"),
    ({"metadata": {"labels": {"team": "x"}}}, "may change only its labels under xpu-cdi.io/, not team"),
], ids=["taint", "cordon", "annotation", "generateName", "foreign-label"])
def test_labeller_refused_any_other_field(cluster: Cluster, labeller: Identity, node_restored: Dict[str, Any],
                                          patch: Dict[str, Any], field: str) -> None:
    refused(patch_node(cluster, labeller, patch), field)


def test_labeller_may_not_touch_status(cluster: Cluster, labeller: Identity, node_restored: Dict[str, Any]) -> None:
    """The status subresource is out of its role (RBAC: nodes, get and patch only)."""
    r = as_(cluster, labeller, "patch", "node", cluster.node_name, "--subresource", "status", "--type", "merge",
            "-p", json.dumps({"status": {"capacity": {"example.com/x": "1"}}}))
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr


def test_labeller_still_sets_and_removes_its_labels(cluster: Cluster, labeller: Identity,
                                                     node_restored: Dict[str, Any]) -> None:
    """What the daemon does: a label of ours added, changed, removed (a JSON merge patch, as it sends)."""
    for value in ("1", "2", None):
        r = patch_node(cluster, labeller, {"metadata": {"labels": {"xpu-cdi.io/xpu.policy-probe": value}}})
        assert r.returncode == 0, r.stderr
        assert cluster.node()["metadata"]["labels"].get("xpu-cdi.io/xpu.policy-probe") == value


# ---- the DRA driver -------------------------------------------------------------------------------

def slice_of(name: str, node: str, pool: str = "", driver: str = "kunlunxin.com",
             **meta: Any) -> Dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name, **meta},
            "spec": {"driver": driver, "nodeName": node, "devices": [],
                     "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1}}}


@pytest.fixture
def slices(cluster: Cluster) -> Iterator[Dict[str, str]]:
    """Names for the test's slices; all deleted as admin afterwards (finalizers first)."""
    names: Dict[str, str] = {}
    yield names
    for name in names.values():
        cluster.kubectl("patch", "resourceslice", name, "--type", "merge", "-p", '{"metadata":{"finalizers":null}}',
                        check=False)
        cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found", "--wait=false")


def create_as(cluster: Cluster, who: Identity, obj: Dict[str, Any]) -> subprocess.CompletedProcess:
    return as_(cluster, who, "create", "-f", "-", input=json.dumps(obj))


def test_driver_writes_its_own_slice(cluster: Cluster, driver: Identity, slices: Dict[str, str]) -> None:
    """What the daemon does (xpu_cdi.dra.slices.build): create, update and delete its node's slice,
    owned by its Node; each allowed."""
    node = cluster.node()
    name = slices["own"] = nodekit.unique("policy-own")
    own = slice_of(name, cluster.node_name, ownerReferences=[{"apiVersion": "v1", "kind": "Node",
                                                              "name": cluster.node_name,
                                                              "uid": node["metadata"]["uid"], "controller": True}])
    r = create_as(cluster, driver, own)
    assert r.returncode == 0, r.stderr
    own["spec"]["pool"]["generation"] = 2
    got = cluster.get("resourceslice", name)
    own["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"]
    r = as_(cluster, driver, "replace", "-f", "-", input=json.dumps(own))
    assert r.returncode == 0, r.stderr
    r = as_(cluster, driver, "delete", "resourceslice", name)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("case,needle", [
    ("other-node", f"may only write that node's ResourceSlices, not '{OTHER}'"),
    ("other-pool", f"is named after it, not '{OTHER}'"),
    ("foreign-driver", "driver 'gpu.nvidia.com' is none of this chart's DeviceClasses' drivers"),
    ("owner-other-node", "may be owned by that Node only"),
    ("owner-not-a-node", "may be owned by that Node only"),
    ("finalizer", "may not add or remove a finalizer"),
    ("label", "may not add or change a ResourceSlice's labels or annotations"),
    ("annotation", "may not add or change a ResourceSlice's labels or annotations"),
])
def test_driver_refused_a_slice(cluster: Cluster, driver: Identity, slices: Dict[str, str], case: str,
                                needle: str) -> None:
    name = slices[case] = nodekit.unique("policy-" + case)
    me = cluster.node_name
    obj = {"other-node": slice_of(name, OTHER),
           "other-pool": slice_of(name, me, pool=OTHER),  # would hide that node's pool from the scheduler
           "foreign-driver": slice_of(name, me, driver="gpu.nvidia.com"),
           "owner-other-node": slice_of(name, me, ownerReferences=[
               {"apiVersion": "v1", "kind": "Node", "name": OTHER, "uid": "0f0e0d0c-0000-4000-8000-000000000000"}]),
           "owner-not-a-node": slice_of(name, me, ownerReferences=[
               {"apiVersion": "v1", "kind": "Namespace", "name": "default",
                "uid": cluster.get("namespace", "default")["metadata"]["uid"]}]),
           "finalizer": slice_of(name, me, finalizers=["xpu-cdi.io/hold"]),
           "label": slice_of(name, me, labels={"x": "1"}),
           "annotation": slice_of(name, me, annotations={"x": "1"})}[case]
    refused(create_as(cluster, driver, obj), needle)
    assert cluster.kubectl("get", "resourceslice", name, check=False).returncode != 0


def test_driver_refused_another_nodes_slice(cluster: Cluster, driver: Identity, slices: Dict[str, str]) -> None:
    """A slice of another node (made by the admin): the driver may neither change nor delete it."""
    name = slices["theirs"] = nodekit.unique("policy-theirs")
    cluster.kubectl("create", "-f", "-", input=json.dumps(slice_of(name, OTHER)))
    r = as_(cluster, driver, "patch", "resourceslice", name, "--type", "merge", "-p",
            json.dumps({"spec": {"pool": {"generation": 9}}}))
    refused(r, f"not '{OTHER}'")
    refused(as_(cluster, driver, "delete", "resourceslice", name), f"not '{OTHER}'")
    assert cluster.get("resourceslice", name)["spec"]["pool"]["generation"] == 1


def test_driver_refused_to_add_labels_to_its_own_slice(cluster: Cluster, driver: Identity,
                                                       slices: Dict[str, str]) -> None:
    name = slices["own"] = nodekit.unique("policy-own")
    r = create_as(cluster, driver, slice_of(name, cluster.node_name))
    assert r.returncode == 0, r.stderr
    refused(as_(cluster, driver, "label", "resourceslice", name, "x=1"), "labels or annotations")
    refused(as_(cluster, driver, "patch", "resourceslice", name, "--type", "merge", "-p",
                json.dumps({"metadata": {"finalizers": ["xpu-cdi.io/hold"]}})), "finalizer")


def event(node: str, kind: str = "Node", name: str = "", reason: str = "CheckpointCorrupt", host: str = "",
          namespace: str = "default", **fields: Any) -> Dict[str, Any]:
    involved = {"kind": kind, "name": name or node, **({"namespace": "default"} if kind == "Pod" else {})}
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": "xpu-cdi-policy-", "namespace": namespace, **fields.pop("meta", {})},
            "involvedObject": involved, "reason": reason, "message": "policy test", "type": "Warning",
            "source": {"component": "xpu-cdi-dra-driver", **({"host": host} if host else {})}, **fields}


def allowed(cluster: Cluster, r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr
    made = r.stdout.split()[0]  # event/xpu-cdi-policy-xxxxx created
    cluster.kubectl("delete", "-n", "default", made, "--ignore-not-found")


def test_driver_events_about_its_own_node_only(cluster: Cluster, driver: Identity) -> None:
    me = cluster.node_name
    refused(create_as(cluster, driver, event(OTHER)),
            "may only record Events about that Node, or a remediation decision", f"not about Node '{OTHER}'")
    refused(create_as(cluster, driver, event(me, "Pod", "victim")), "not about Pod 'victim'")
    allowed(cluster, create_as(cluster, driver, event(me)))  # what Kube.event records (a corrupt checkpoint)
    allowed(cluster, create_as(cluster, driver, event(me, host=me)))
    # an Event about a pod outside the pod's namespace: the API server's own validation refuses it
    r = create_as(cluster, driver, event(me, "Pod", "victim", reason="CardUnhealthyEvicting", host=me,
                                         namespace="kube-system"))
    assert r.returncode != 0 and "does not match event.namespace" in r.stderr, r.stderr


@pytest.mark.parametrize("case,needle", [
    ("not-a-decision", "not about Pod 'victim'"),  # any other reason about a pod
    ("no-source-host", "not about Pod 'victim'"),
    ("other-source-host", "not about Pod 'victim'"),
    ("node-other-source-host", "names that node as its source"),
    ("reporting-instance", "names that node as its source"),
    ("related", "relates to nothing else"),
    ("label", "no owner, finalizer, label or annotation"),
    ("annotation", "no owner, finalizer, label or annotation"),
])
def test_driver_refused_an_event(cluster: Cluster, driver: Identity, case: str, needle: str) -> None:
    """A remediation decision about a Pod is the one Event about something else than its Node the driver
    may record: every field a forged one could mislead with is checked."""
    me = cluster.node_name
    decision = dict(kind="Pod", name="victim", reason="CardUnhealthyEvicting", host=me)
    obj = {"not-a-decision": event(me, **dict(decision, reason="Killing")),
           "no-source-host": event(me, **dict(decision, host="")),
           "other-source-host": event(me, **dict(decision, host=OTHER)),
           "node-other-source-host": event(me, host=OTHER),
           "reporting-instance": event(me, host=me, reportingComponent="xpu-cdi-dra-driver", reportingInstance=OTHER),
           "related": event(me, **decision, related={"kind": "Node", "name": OTHER}),
           "label": event(me, **decision, meta={"labels": {"x": "1"}}),
           "annotation": event(me, **decision, meta={"annotations": {"x": "1"}})}[case]
    refused(create_as(cluster, driver, obj), needle)


def test_driver_records_a_remediation_decision_about_a_pod(cluster: Cluster, driver: Identity) -> None:
    """What KindDriver.remediate records about each pod holding the card: allowed (the policy cannot look
    the pod up; docs/dra.md says what that leaves)."""
    me = cluster.node_name
    for reason in ("CardUnhealthyEvicting", "CardRestored"):
        allowed(cluster, create_as(cluster, driver, event(me, "Pod", "holder", reason=reason, host=me)))


def test_driver_cannot_taint_another_nodes_cards(cluster: Cluster, driver: Identity, slices: Dict[str, str]) -> None:
    """A NoExecute taint on another node's device (its slice made by the admin): refused by the slice
    policy; a DeviceTaintRule (which can select any node's devices; an empty one taints all of them,
    kubernetes#141422) is out of the driver's role altogether."""
    name = slices["theirs"] = nodekit.unique("policy-theirs")
    theirs = slice_of(name, OTHER)
    theirs["spec"]["devices"] = [{"name": "0"}]
    cluster.kubectl("create", "-f", "-", input=json.dumps(theirs))
    r = as_(cluster, driver, "patch", "resourceslice", name, "--type", "json", "-p", json.dumps(
        [{"op": "add", "path": "/spec/devices/0/taints",
          "value": [{"key": "kunlunxin.com/unhealthy", "effect": "NoExecute"}]}]))
    refused(r, f"not '{OTHER}'")
    assert not cluster.get("resourceslice", name)["spec"]["devices"][0].get("taints")
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "policy-all"},
            "spec": {"taint": {"key": "kunlunxin.com/unhealthy", "effect": "NoExecute"}}}
    r = create_as(cluster, driver, rule)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    assert cluster.kubectl("get", "devicetaintrule", "policy-all", check=False).returncode != 0


def test_driver_cannot_evict_or_delete_a_pod(cluster: Cluster, driver: Identity) -> None:
    """Kubernetes evicts on the NoExecute taint: the driver's token itself may not (RBAC), not even the
    stand-in pod its token is bound to."""
    pod = driver.pod
    r = as_(cluster, driver, "delete", "pod", pod, "-n", "kube-system", "--wait=false")
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "kube-system"}}
    r = as_(cluster, driver, "create", "--raw", f"/api/v1/namespaces/kube-system/pods/{pod}/eviction", "-f", "-",
            input=json.dumps(eviction))
    assert r.returncode != 0 and "forbidden" in r.stderr.lower(), r.stderr
    assert cluster.pod(pod, namespace="kube-system")["metadata"].get("deletionTimestamp") is None
