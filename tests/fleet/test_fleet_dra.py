"""DRA on the fleet (issue 28, items 4 and 6), with the real API server, scheduler and kubelets:
nodes B (4 x 310P) and C (8 x 910B) switched from deploy/'s device plugin to deploy/dra's driver
as an admin does it (conftest.py's ``dra_nodes``: the node label ``xpu-cdi.io/kubernetes-allocation=dra``),
node A's P800 left with the plugin.  One pool per node; claims from one ResourceClaimTemplate
spread by the scheduler; a DeviceClass by model lands on its node only; the driver-upgrade drill's
re-publish on node C; the switch back to the plugin.  docs/fleet.md says what runs."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from support import fakehost, matrix
from support.k8s import fleetdeploy, nodekit
from support.k8s.fleet import FAKE_ROOTS, NODES, Fleet, NodeSpec
from support.k8s.fleetdeploy import DRA_DS, PLUGIN_DS, ds_pods, slices
from support.k8s.fleetdrill import DRIVER, NEW, NEW_SEMVER, OLD, OLD_SEMVER, upgrade

pytestmark = [pytest.mark.privileged]
A, B, C = NODES
CLASS = "npu.huawei.com"  # deploy/dra's DeviceClass of the Ascend driver
#: What a pod prints: the driver's version file, then each NPU node it has and whether it opens
#: (ENXIO: the fake card is there and the device cgroup lets it through).
SCRIPT = (f"cat {DRIVER}/version.info; for n in /dev/davinci*; do [ -e $n ] && {{ echo present $n; "
          f"(echo x > $n) 2>&1; }}; done; echo {nodekit.DONE}; exec sleep 2147483647")


@pytest.fixture
def objects(fleet: Fleet) -> Iterator[List[Tuple[str, str]]]:
    """(kind, name) of what a test makes, deleted afterwards, last made first."""
    made: List[Tuple[str, str]] = []
    yield made
    for kind, name in reversed(made):
        fleet.kubectl("delete", kind, name, "--ignore-not-found", "--wait=true", timeout=180)
    fleet.wait(lambda: not fleet.get("resourceclaims")["items"], 120, "the pods' claims gone")


def template(fleet: Fleet, objects: List[Tuple[str, str]], count: int, device_class: str = CLASS,
             cel: str = "") -> str:
    """A ResourceClaimTemplate of *count* NPUs of *device_class* (and the CEL selector *cel*); its name."""
    name = nodekit.unique("npus")
    exactly: Dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    fleet.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                 "spec": {"spec": {"devices": {"requests": [{"name": "npus", "exactly": exactly}]}}}})
    objects.append(("resourceclaimtemplate", name))
    return name


def pod_spec(tmpl: str) -> Dict[str, Any]:
    """A pod spec on the pod network whose container uses a claim from *tmpl* and runs SCRIPT."""
    return {"terminationGracePeriodSeconds": 1, "resourceClaims": [{"name": "npus", "resourceClaimTemplateName": tmpl}],
            "containers": [{"name": "c", "image": nodekit.BUSYBOX, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", SCRIPT], "resources": {"claims": [{"name": "npus"}]}}]}


def claim_pod(fleet: Fleet, objects: List[Tuple[str, str]], tmpl: str, node: str = "") -> str:
    """A pod of pod_spec(*tmpl*), on *node* if given (a nodeSelector), created; its name."""
    name = nodekit.unique("npu")
    spec = pod_spec(tmpl)
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    fleet.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    objects.append(("pod", name))
    return name


def output(fleet: Fleet, pod: str) -> str:
    """What *pod* printed, once it has (Running)."""
    fleet.control.wait_pod_phase(pod, "Running", 180)
    return fleet.wait(lambda: (lambda out: out if nodekit.DONE in out else None)(fleet.control.logs(pod)), 60,
                      f"pod {pod}'s output")


def allocation(fleet: Fleet, pod: str) -> Tuple[str, List[int]]:
    """The pool (node) and the devices the scheduler allocated to *pod*'s claim."""
    statuses = fleet.control.pod(pod)["status"].get("resourceClaimStatuses") or []
    (claim,) = [s["resourceClaimName"] for s in statuses]
    results = fleet.get("resourceclaim", claim)["status"]["allocation"]["devices"]["results"]
    assert {r["driver"] for r in results} == {"huawei.com"}, results
    (pool,) = {r["pool"] for r in results}
    return pool, sorted(int(r["device"]) for r in results)


def check_sees_its_cards(fleet: Fleet, pod: str) -> Tuple[str, List[int]]:
    """*pod* runs on its claim's node and sees exactly the claim's NPUs and the manager node, each
    usable (ENXIO); its (node, cards)."""
    out = output(fleet, pod)
    node, cards = allocation(fleet, pod)
    assert fleet.control.pod(pod)["spec"]["nodeName"] == node
    present = [ln.split()[1] for ln in out.splitlines() if ln.startswith("present ")]
    assert present == sorted([f"/dev/davinci{i}" for i in cards] + ["/dev/davinci_manager"]), out
    assert out.count(matrix.ENXIO) == len(cards) + 1, out
    return node, cards


def unschedulable(fleet: Fleet, pod: str) -> str:
    """The scheduler's message once it found no place for *pod*, else ''."""
    conds = {c["type"]: c for c in fleet.control.pod(pod)["status"].get("conditions", [])}
    c = conds.get("PodScheduled", {})
    return c.get("message", "") if c.get("reason") == "Unschedulable" else ""


def attributes(device: Dict[str, Any]) -> Dict[str, Any]:
    """A device's attributes as plain values (``{"model": "Ascend310P", ...}``)."""
    return {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}


def one_way(fleet: Fleet, spec: NodeSpec) -> Dict[str, str]:
    """`xpu-cdi doctor`'s one-way line, run on *spec*'s node (its mount namespace: its /run/xpu-cdi)."""
    r = fleet.nodes[spec.name].run_on_node([matrix.XPU_CDI, "doctor", "--json", "--profile", "ascend",
                                            "--profiles-dir", "/nonexistent", *FAKE_ROOTS, "--proc-root", "/",
                                            "--spec-dir", "/var/run/cdi", "--runtime-version", "none"], timeout=120)
    assert r.stdout.strip().startswith("["), r.stdout + r.stderr
    (line,) = [x for x in json.loads(r.stdout) if x["check"] == "one-way"]
    return line


def test_switching_moves_the_daemons(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...]) -> None:
    """The plugin's pods left B and C and the driver's landed there, nowhere else; B and C offer no
    NPU through the plugin, A still its eight XPUs; doctor on B and C says DRA alone serves the NPUs."""
    assert sorted(p["spec"]["nodeName"] for p in ds_pods(fleet, PLUGIN_DS)) == [A.name]
    assert sorted(p["spec"]["nodeName"] for p in ds_pods(fleet, DRA_DS)) == [B.name, C.name]
    for spec in (B, C):
        assert fleet.nodes[spec.name].allocatable(nodekit.NPU) == 0
        line = one_way(fleet, spec)
        assert line["status"] == "ok" and line["found"] == f"each kind served one way: {nodekit.NPU} by DRA", line
    assert fleet.nodes[A.name].allocatable(nodekit.XPU) == A.cards
    assert one_way(fleet, A)["status"] == "ok"


def test_one_pool_per_node(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...]) -> None:
    """B's and C's slices: one pool each, named after the node and owned by it, its cards by index
    with their model, type and driver version; none of A (its cards are the plugin's)."""
    everything = fleet.get("resourceslices")["items"]
    assert sorted(s["spec"]["nodeName"] for s in everything) == [B.name, C.name], everything
    for spec in (B, C):
        (s,) = slices(fleet, spec.name)
        assert s["spec"]["pool"]["name"] == spec.name and s["spec"]["pool"]["resourceSliceCount"] == 1, s["spec"]
        owner = s["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"]) == ("Node", fleet.get("node", spec.name)["metadata"]["uid"]), owner
        devices = s["spec"]["devices"]
        assert [d["name"] for d in devices] == [str(i) for i in range(spec.cards)], devices
        for d in devices:
            got = attributes(d)
            assert {k: got.get(k) for k in ("model", "type", "index", "driverVersion")} == \
                {"model": spec.model, "type": "chip", "index": int(d["name"]), "driverVersion": OLD_SEMVER}, d
            assert not d.get("taints"), d


def test_claims_spread_by_the_scheduler(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...],
                                        objects: List[Tuple[str, str]]) -> None:
    """A Deployment of four replicas, each with a claim of four NPUs from one ResourceClaimTemplate
    and no node named: the scheduler puts one on B (its four) and two on C (its eight), the fourth
    stays Pending ("cannot allocate all claims"); each pod sees exactly its claim's cards."""
    tmpl = template(fleet, objects, 4)
    name = nodekit.unique("train")
    fleet.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                 "spec": {"replicas": 4, "selector": {"matchLabels": {"app": name}},
                          "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(tmpl)}}})
    objects.append(("deployment", name))

    def placed() -> Dict[str, List[str]]:
        out: Dict[str, List[str]] = {}
        for p in fleet.get("pods", "-l", f"app={name}")["items"]:
            if p["status"].get("phase") == "Running":
                out.setdefault(p["spec"]["nodeName"], []).append(p["metadata"]["name"])
            elif unschedulable(fleet, p["metadata"]["name"]):
                out.setdefault("Pending", []).append(p["metadata"]["name"])
        return out

    got = fleet.wait(lambda: (lambda s: s if sum(map(len, s.values())) == 4 else None)(placed()), 240,
                     "three replicas running, one unschedulable", interval=1)
    assert {k: len(v) for k, v in got.items()} == {B.name: 1, C.name: 2, "Pending": 1}, got
    assert "cannot allocate all claims" in unschedulable(fleet, got["Pending"][0])
    seen: Dict[str, List[int]] = {}
    for pod in got[B.name] + got[C.name]:
        node, cards = check_sees_its_cards(fleet, pod)
        assert len(cards) == 4, cards
        seen.setdefault(node, []).extend(cards)
    assert sorted(seen[B.name]) == list(range(4)) and sorted(seen[C.name]) == list(range(8)), seen


def test_a_class_by_model_lands_on_its_node(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...],
                                            objects: List[Tuple[str, str]]) -> None:
    """A DeviceClass per model (an admin's, selecting on the slices' ``model``): a 310P claim of
    three runs on B; a second one stays Pending although C has eight free NPUs; a 910B claim runs on C."""
    classes = {}
    for spec in (B, C):
        cls = nodekit.unique(spec.model.lower())
        fleet.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
                     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "huawei.com" && '
                                                                  f'device.attributes["huawei.com"].model == '
                                                                  f'"{spec.model}"'}}]}})
        objects.append(("deviceclass", cls))
        classes[spec.name] = cls
    tmpl_310p = template(fleet, objects, 3, classes[B.name])
    first = claim_pod(fleet, objects, tmpl_310p)
    node, cards = check_sees_its_cards(fleet, first)
    assert (node, len(cards)) == (B.name, 3)
    second = claim_pod(fleet, objects, tmpl_310p)
    why = fleet.wait(lambda: unschedulable(fleet, second), 120, "the second 310P pod unschedulable")
    assert "cannot allocate all claims" in why, why
    on_c = claim_pod(fleet, objects, template(fleet, objects, 1, classes[C.name]))
    node, cards = check_sees_its_cards(fleet, on_c)
    assert (node, len(cards)) == (C.name, 1)
    assert unschedulable(fleet, second), fleet.control.pod(second)["status"]


def driver_versions(fleet: Fleet, spec: NodeSpec) -> Tuple[int, List[str]]:
    """*spec*'s pool generation and its devices' driverVersion."""
    (s,) = slices(fleet, spec.name)
    return s["spec"]["pool"]["generation"], [attributes(d)["driverVersion"] for d in s["spec"]["devices"]]


def test_a_driver_upgrade_republishes_the_slice(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...],
                                                old_driver: fakehost.FakeHost,
                                                objects: List[Tuple[str, str]]) -> None:
    """The drill (test_fleet_drill.py) by DRA: while a claim's pod runs on C, C's driver is replaced
    by 25.0.rc1.  The driver re-publishes C's pool with the new ``driverVersion`` (a new generation),
    B's stays on 24.1; a claim selecting ``driverVersion >= 25.0.0-rc1``, unschedulable before,
    is then allocated on C and its pod sees the new release; the old pod runs on, unrestarted."""
    generation, versions = driver_versions(fleet, C)
    assert versions == [OLD_SEMVER] * C.cards
    old = claim_pod(fleet, objects, template(fleet, objects, 1), node=C.name)
    assert output(fleet, old).splitlines()[0] == OLD
    newer = template(fleet, objects, 1, cel=f'device.attributes["huawei.com"].driverVersion'
                                            f'.compareTo(semver("{NEW_SEMVER}")) >= 0')
    waiting = claim_pod(fleet, objects, newer)
    fleet.wait(lambda: unschedulable(fleet, waiting), 120, "the pod for the new driver unschedulable")

    upgrade(old_driver)
    got = fleet.wait(lambda: (lambda g: g if g[1] == [NEW_SEMVER] * C.cards else None)(driver_versions(fleet, C)),
                     120, "C's slice re-published with the new driver version")
    assert got[0] > generation, (generation, got)
    assert driver_versions(fleet, B)[1] == [OLD_SEMVER] * B.cards
    out = output(fleet, waiting)
    assert out.splitlines()[0] == NEW and allocation(fleet, waiting)[0] == C.name, out
    pod = fleet.control.pod(old)
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 0


NODE_CONFIG = "/etc/xpu-cdi/config.yaml"
#: What deploy/dra's DaemonSet of earlier releases wrote on a node without a node config: its
#: ``kubernetes-allocation: dra`` made the device plugin refuse the node after a switch back.
EARLIER_DRA = ("# written to /etc/xpu-cdi/config.yaml by the DRA DaemonSet where the host has none\n"
               "accept-env-selection-when-unprivileged: false\nkubernetes-allocation: dra\n")


def node_config(fleet: Fleet, spec: NodeSpec) -> str:
    """*spec*'s /etc/xpu-cdi/config.yaml, as its daemons see it."""
    r = fleet.nodes[spec.name].run_on_node(["cat", NODE_CONFIG])
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_dra_first_node_switches_both_ways(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...]) -> None:
    """Node B as a DRA-first install leaves it: no node config until deploy/dra's driver pod wrote
    one.  By the label alone it switches to the plugin (its four NPUs allocatable) and back to DRA
    (its pool published), the node config the DaemonSets' own each time, naming no way.  Then as an
    earlier release's DRA-first install left it (``kubernetes-allocation: dra`` in the node config):
    the plugin's pod rewrites the file and serves the node."""
    ours = fleet.get("configmap", "xpu-cdi-dra-node-config", "-n", fleetdeploy.NS)["data"]["config.yaml"]
    assert ours == fleet.get("configmap", "xpu-cdi-node-config", "-n", fleetdeploy.NS)["data"]["config.yaml"]
    assert "kubernetes-allocation" not in ours
    fleet.nodes[B.name].remove_node_file(NODE_CONFIG)
    (pod,) = [p["metadata"]["name"] for p in ds_pods(fleet, DRA_DS) if p["spec"]["nodeName"] == B.name]
    fleet.kubectl("delete", "pod", "-n", fleetdeploy.NS, pod, "--wait=true", timeout=180)
    fleetdeploy.serve_by(fleet, (B,), fleetdeploy.DRA)  # the new pod Ready, B's pool published again
    assert node_config(fleet, B) == ours
    took = [fleetdeploy.serve_by(fleet, (B,), way) for way in (fleetdeploy.DEVICE_PLUGIN, fleetdeploy.DRA)]
    assert node_config(fleet, B) == ours
    fleet.nodes[B.name].write_node_file(NODE_CONFIG, EARLIER_DRA)
    took.append(fleetdeploy.serve_by(fleet, (B,), fleetdeploy.DEVICE_PLUGIN))
    assert node_config(fleet, B) == ours
    took.append(fleetdeploy.serve_by(fleet, (B,), fleetdeploy.DRA))
    print(f"B: to the plugin, to DRA, to the plugin (earlier file), to DRA in {', '.join(f'{t:.1f}' for t in took)} s; "
          f"load {open('/proc/loadavg').read().split()[:3]}")


def test_switching_back_restores_the_plugin(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...],
                                            objects: List[Tuple[str, str]]) -> None:
    """The label removed from B and C: the driver's pods leave and withdraw their slices, the
    plugin's come back and their NPUs are allocatable again; a pod asking huawei.com/npu: 2 on C
    gets two, as kubelet's checkpoint records (what doctor's one-way reads).  (The fixture switches
    back again at the module's end: a no-op after this.)"""
    took = fleetdeploy.serve_by(fleet, dra_nodes, fleetdeploy.DEVICE_PLUGIN)
    print(f"nodes B and C back on the device plugin in {took:.1f} s; load {open('/proc/loadavg').read().split()[:3]}")
    assert not ds_pods(fleet, DRA_DS) and not fleet.get("resourceslices")["items"]
    assert sorted(p["spec"]["nodeName"] for p in ds_pods(fleet, PLUGIN_DS)) == sorted(s.name for s in NODES)
    for spec in NODES:
        assert fleet.nodes[spec.name].allocatable(spec.kind) == spec.cards
    assert "by the device plugin" in one_way(fleet, C)["found"]
    name = nodekit.unique("npu")
    pod = nodekit.pod(name, ["sh", "-c", SCRIPT], {nodekit.NPU: 2})
    pod["spec"].update(hostNetwork=False, nodeSelector={"kubernetes.io/hostname": C.name})
    fleet.apply(pod)
    objects.append(("pod", name))
    present = re.findall(r"^present /dev/davinci(\d+)$", output(fleet, name), re.M)
    assert len(present) == 2, present
    # what doctor's one-way reads to find cards the plugin gave (kubelet's checkpoint, as 1.37 writes it)
    uid = fleet.control.pod(name)["metadata"]["uid"]
    kept = json.loads((fleet.nodes[C.name].plugin_dir / "kubelet_internal_checkpoint").read_text())
    (entry,) = [e for e in kept["Data"]["PodDeviceEntries"] if e["PodUID"] == uid]
    assert entry["ResourceName"] == nodekit.NPU, entry
    assert sorted(i for ids in entry["DeviceIDs"].values() for i in ids) == sorted(present), entry


def test_a_switch_without_draining_is_flagged_by_doctor(fleet: Fleet, dra_nodes: Tuple[NodeSpec, ...],
                                                         objects: List[Tuple[str, str]]) -> None:
    """What docs/dra.md warns of: node C switched to DRA while a pod holds two NPUs the plugin gave
    it.  The pod runs on, the driver publishes all eight NPUs (those two among them, as free), and
    doctor's one-way on C names the pod and its two cards; once the pod is gone, one-way is ok."""
    fleetdeploy.serve_by(fleet, (C,), fleetdeploy.DEVICE_PLUGIN)
    name = nodekit.unique("npu")
    pod = nodekit.pod(name, ["sh", "-c", SCRIPT], {nodekit.NPU: 2})
    pod["spec"].update(hostNetwork=False, nodeSelector={"kubernetes.io/hostname": C.name})
    fleet.apply(pod)
    objects.append(("pod", name))
    present = sorted(re.findall(r"^present /dev/davinci(\d+)$", output(fleet, name), re.M))
    uid = fleet.control.pod(name)["metadata"]["uid"]
    fleetdeploy.serve_by(fleet, (C,), fleetdeploy.DRA)
    assert fleet.control.pod(name)["status"]["phase"] == "Running"
    (s,) = slices(fleet, C.name)
    assert set(present) <= {d["name"] for d in s["spec"]["devices"]}, s["spec"]["devices"]
    line = one_way(fleet, C)
    assert line["status"] == "warn" and f"pod {uid}: {nodekit.NPU} {','.join(present)}" in line["found"], line
    nodekit.wait_gone(fleet.control, name)
    assert one_way(fleet, C)["status"] == "ok"
