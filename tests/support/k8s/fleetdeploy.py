"""deploy/ on the fleet, as a user applies it (tests/fleet/conftest.py's fixtures, scripts/bench_fleet.py),
through a kustomize overlay of the tests' that changes only what the fake hosts need
(support/k8s/fleet.py: every node sees its own at FAKE_ROOT): the discovery roots in the args,
that directory mounted, the fake host's /lib/modules for the machine's absent one; the device
plugin's health checked every half second, no uevents."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence

import yaml

from support import imagebuild
from support.k8s.cluster import ClusterError
from support.k8s.dsnode import same_path_ops, write_kustomization
from support.k8s.fleet import FAKE_ROOT, FAKE_ROOTS, PRESENT, Fleet, NodeSpec

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NS = "kube-system"
PLUGIN_DS, DRA_DS = "xpu-cdi", "xpu-cdi-dra-driver"
#: The admin's choice of way per node (docs/dra.md, "Device plugin or DRA, per node"): ``dra`` puts
#: the node under deploy/dra's DaemonSet and takes it from deploy/'s device plugin; absent: the plugin.
ALLOCATION = "xpu-cdi.io/kubernetes-allocation"
DEVICE_PLUGIN, DRA = "device-plugin", "dra"


def ds_ops(path: Path, name: str, extra: Dict[str, List[str]], moves: Dict[str, str]) -> List[Dict[str, Any]]:
    ds = next(d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "DaemonSet"
              and d["metadata"]["name"] == name)
    host_network = bool(ds["spec"]["template"]["spec"].get("hostNetwork"))
    return same_path_ops(ds, moves, FAKE_ROOT, extra, {}, {}, host_network)


def overlay(base: Path, name: str, resource: Path, tag: str, patches: Dict[str, List[Dict[str, Any]]]) -> Path:
    d = base / name
    d.mkdir()
    write_kustomization(d, [os.path.relpath(resource, d)], tag, patches)
    return d


def ds_pods(fleet: Fleet, name: str) -> List[Dict[str, Any]]:
    """The pods DaemonSet *name* owns (by owner, not by label: deploy/'s selector,
    ``app.kubernetes.io/name=xpu-cdi``, matches deploy/dra's pods too)."""
    return [p for p in fleet.get("pods", "-n", NS)["items"]
            if any(o["kind"] == "DaemonSet" and o["name"] == name for o in p["metadata"].get("ownerReferences") or [])]


def rolled_out(fleet: Fleet, name: str, count: int) -> None:
    """Until DaemonSet *name* has a Ready pod on *count* nodes and no other pod; else a ClusterError
    with the pods' events and logs (an xdist worker's output is not shown)."""
    def done() -> bool:
        st = fleet.get("daemonset", name, "-n", NS).get("status", {})
        return (st.get("desiredNumberScheduled"), st.get("numberReady")) == (count, count) and \
            len(ds_pods(fleet, name)) == count

    try:
        fleet.wait(done, 180, f"DaemonSet {name} ready on {count} nodes", interval=1)
        return
    except ClusterError as err:
        report = [str(err)]
    # raised out of the except block: an error this one follows (a failed set-up, then its undoing) stays shown
    for p in ds_pods(fleet, name):
        pod = p["metadata"]["name"]
        report.append(fleet.control.describe_pod(pod, NS)[-1500:])
        for c in p["spec"].get("initContainers", []) + p["spec"]["containers"]:
            r = fleet.kubectl("logs", pod, "-n", NS, "-c", c["name"], check=False)
            report.append(f"--- {pod} {c['name']}: {r.stdout[-1000:]}{r.stderr[-300:]}")
    raise ClusterError("\n".join(report))


def import_image(fleet: Fleet) -> str:
    """The checkout's image (make image's build, cached) in every node's containerd; its tag."""
    img = imagebuild.image()
    fleet.on_each_node(lambda node: node.import_image(img["archive"]))
    return str(img["name"]).rsplit(":", 1)[1]


def apply_labels(fleet: Fleet, tag: str, base: Path) -> Path:
    """deploy/labels applied (its overlay written in *base*): the labeller on every node, each
    node labelled present; the overlay dir (``kubectl delete -k`` it)."""
    ops = ds_ops(DEPLOY / "labels" / "daemonset.yaml", "xpu-cdi-labeller",
                 {"labeller": FAKE_ROOTS + ["--uevents", "none", "--interval", "1"]}, {})
    d = overlay(base, "labels", DEPLOY / "labels", tag, {"xpu-cdi-labeller": ops})
    fleet.kubectl("apply", "-k", str(d), timeout=180)
    rolled_out(fleet, "xpu-cdi-labeller", len(fleet.node_specs))
    fleet.wait(lambda: all(fleet.labels(s.name).get(PRESENT) == "true" for s in fleet.node_specs), 120,
               "every node labelled present")
    return d


def apply_deploy(fleet: Fleet, tag: str, base: Path) -> Path:
    """deploy/ applied (specs, device plugin, exporter) on the nodes labelled present, until every
    node's cards are allocatable; the overlay dir."""
    roots = FAKE_ROOTS
    moves = {"host-lib-modules": f"{FAKE_ROOT}/lib/modules"}
    main = ds_ops(DEPLOY / "daemonset.yaml", "xpu-cdi", {
        "generate": roots, "watch": roots + ["--source", "none", "--poll-interval", "1"],
        "device-plugin": roots + ["--uevents", "none", "--health-interval", "0.5"]}, moves)
    exporter = ds_ops(DEPLOY / "exporter.yaml", "xpu-cdi-exporter", {"exporter": roots + ["--interval", "1"]}, {})
    host_lib_modules(fleet)
    d = overlay(base, "deploy", DEPLOY, tag, {"xpu-cdi": main, "xpu-cdi-exporter": exporter})
    fleet.kubectl("apply", "-k", str(d), timeout=180)
    rolled_out(fleet, "xpu-cdi", len(fleet.node_specs))
    rolled_out(fleet, "xpu-cdi-exporter", len(fleet.node_specs))
    for spec in fleet.node_specs:
        fleet.nodes[spec.name].wait_allocatable(spec.kind, spec.cards, timeout=120)
    return d


def host_lib_modules(fleet: Fleet) -> None:
    """The fake hosts' /lib/modules, which the overlays mount in place of the machine's absent one."""
    for spec in fleet.node_specs:
        fleet.hosts[spec.name].path("/lib/modules").mkdir(parents=True, exist_ok=True)


def apply_dra(fleet: Fleet, tag: str, base: Path) -> Path:
    """deploy/dra applied (RBAC, admission policy, DeviceClasses, the DaemonSet: on the nodes
    labelled for DRA, none yet); the overlay dir.  The driver on the pod network reaches the API
    server through the ``kubernetes`` Service (kube-proxy), as on a real node."""
    roots = FAKE_ROOTS
    ops = ds_ops(DEPLOY / "dra" / "daemonset.yaml", DRA_DS, {
        "generate": roots, "watch": roots + ["--source", "none", "--poll-interval", "1"],
        "dra-driver": roots + ["--health-interval", "0.5"]}, {"host-lib-modules": f"{FAKE_ROOT}/lib/modules"})
    host_lib_modules(fleet)
    d = overlay(base, "dra", DEPLOY / "dra", tag, {DRA_DS: ops})
    fleet.kubectl("apply", "-k", str(d), timeout=180)
    return d


def slices(fleet: Fleet, node: str, driver: str = "huawei.com") -> List[Dict[str, Any]]:
    """*node*'s ResourceSlices of *driver*."""
    return fleet.get("resourceslices", "--field-selector", f"spec.nodeName={node},spec.driver={driver}")["items"]


def serve_by(fleet: Fleet, nodes: Sequence[NodeSpec], way: str) -> float:
    """*nodes*' cards served by *way* as an admin switches them: their :data:`ALLOCATION` label set
    (``dra``) or removed (the device plugin); until the other way's DaemonSet pods have left them,
    this way's are Ready there and serve every card (a pool of them in the node's ResourceSlice, or
    the plugin's resource allocatable), and the other way offers none; the seconds it took."""
    t0 = time.monotonic()
    names = [s.name for s in nodes]
    fleet.kubectl("label", "node", *names, f"{ALLOCATION}=dra" if way == DRA else f"{ALLOCATION}-", "--overwrite")
    leaving = PLUGIN_DS if way == DRA else DRA_DS
    fleet.wait(lambda: not [p for p in ds_pods(fleet, leaving) if p["spec"].get("nodeName") in names], 180,
               f"{leaving}'s pods gone from {names}", interval=1)
    on_dra = sum(fleet.labels(s.name).get(ALLOCATION) == DRA for s in fleet.node_specs)
    rolled_out(fleet, DRA_DS, on_dra)
    rolled_out(fleet, PLUGIN_DS, len(fleet.node_specs) - on_dra)
    for spec in nodes:
        node = fleet.nodes[spec.name]
        if way == DRA:
            published(fleet, spec)
            node.wait_allocatable(spec.kind, 0, timeout=120)
        else:
            node.wait_allocatable(spec.kind, spec.cards, timeout=120)
            fleet.wait(lambda: not slices(fleet, spec.name), 120, f"{spec.name}'s slices withdrawn")
    return time.monotonic() - t0


def published(fleet: Fleet, spec: NodeSpec) -> None:
    """Until *spec*'s node's ResourceSlices carry all its cards."""
    fleet.wait(lambda: sum(len(s["spec"].get("devices") or []) for s in slices(fleet, spec.name)) == spec.cards,
               120, f"{spec.name}'s {spec.cards} cards published")


def dra_only(fleet: Fleet, tag: str, base: Path) -> float:
    """Every node of *fleet* served by deploy/dra alone, as an admin sets up a pool of DRA nodes
    (the training fleet's): each node labelled ``xpu-cdi.io/kubernetes-allocation=dra``,
    deploy/labels applied (the labeller marks each node present), deploy/dra applied (overlays in
    *base*); until the driver is Ready on every node and every card is in its node's pool.  No
    device plugin: deploy/ is not applied.  The seconds it took."""
    t0 = time.monotonic()
    fleet.kubectl("label", "node", *(s.name for s in fleet.node_specs), f"{ALLOCATION}={DRA}", "--overwrite")
    apply_labels(fleet, tag, base)
    apply_dra(fleet, tag, base)
    rolled_out(fleet, DRA_DS, len(fleet.node_specs))
    for spec in fleet.node_specs:
        published(fleet, spec)
    return time.monotonic() - t0


@contextlib.contextmanager
def on_dra(fleet: Fleet, tag: str, base: Path, nodes: Sequence[NodeSpec]) -> Iterator[float]:
    """deploy/dra applied (its overlay in *base*) and *nodes* switched to it (:func:`serve_by`);
    the seconds the switch took.  Afterwards switched back to the device plugin, deploy/dra deleted."""
    d = apply_dra(fleet, tag, base)
    try:
        yield serve_by(fleet, nodes, DRA)
    finally:
        try:
            serve_by(fleet, nodes, DEVICE_PLUGIN)
        finally:
            delete(fleet, d)


def delete(fleet: Fleet, overlay_dir: Path) -> None:
    fleet.kubectl("delete", "-k", str(overlay_dir), "--ignore-not-found", "--wait=true", timeout=300, check=False)


def daemon_pids(fleet: Fleet, ds: str) -> Dict[str, Dict[str, int]]:
    """node -> container -> its process (the container's init: deploy/'s run the daemon itself),
    for DaemonSet *ds*'s running containers, from each node's containerd (``ctr task ls``)."""
    out: Dict[str, Dict[str, int]] = {}
    for p in ds_pods(fleet, ds):
        node = p["spec"]["nodeName"]
        r = fleet.nodes[node].ctr("task", "ls")
        tasks = {cols[0]: int(cols[1]) for cols in (ln.split() for ln in r.stdout.splitlines()[1:]) if len(cols) >= 2}
        for cs in p["status"].get("containerStatuses", []):
            if cs.get("containerID"):
                out.setdefault(node, {})[cs["name"]] = tasks[cs["containerID"].split("://", 1)[1]]
    return out
