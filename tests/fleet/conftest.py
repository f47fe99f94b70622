"""The fleet of the fleet tests (support/k8s/fleet.py, docs/fleet.md): a control plane and three
nodes of different cards on a pod network, started once per pytest session by the first test that
asks for it, never by any other.

Every test here is in the xdist group ``k8s-fleet`` (tests/conftest.py's XDIST_GROUPS, from the
path), so under ``make test``'s ``-n 2 --dist loadgroup`` one worker starts the fleet, once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml
from support import imagebuild
from support.k8s import nodekit
from support.k8s.cluster import ClusterError
from support.k8s.dsnode import same_path_ops, write_kustomization
from support.k8s.fleet import FAKE_ROOT, FAKE_ROOTS, NODES, PRESENT, Fleet

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NS = "kube-system"

#: What the fleet runs: the builds (kube-proxy: the same k8s.io/kubernetes pin) and Debian's CNI plugins.
COMPONENTS = ("kubernetes", "containerd", "etcd", "kube-proxy")
CNI_PLUGINS = ("loopback", "bridge", "host-local")


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The started fleet (every node Ready); its members' logs kept in pytest's temp dir (``fleet-logs*``)."""
    nodekit.check_machine(COMPONENTS, CNI_PLUGINS)  # the builds first: the cold start is timed without them
    f = Fleet(tmp_path_factory.mktemp("fleet"), feature_gates=nodekit.FEATURE_GATES)
    for member in f.members:
        member.record()
    f.start()
    print(f"the fleet started in {f.timings['total']:.1f} s "
          f"(control plane {f.timings['control plane']:.1f} s, nodes {f.timings['nodes']:.1f} s)")
    try:
        yield f
    finally:
        f.stop(keep_logs=tmp_path_factory.mktemp("fleet-logs"))


# deploy/ on the fleet, as a user applies it, through a kustomize overlay of the tests' that changes
# only what the fake hosts need (support/k8s/fleet.py: every node sees its own at FAKE_ROOT): the
# discovery roots in the args, that directory mounted, the fake host's /lib/modules for the
# machine's absent one; the device plugin's health checked every half second, no uevents.

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


@pytest.fixture(scope="session")
def image(fleet: Fleet) -> str:
    """The checkout's image (make image's build, cached), imported into every node's containerd."""
    img = imagebuild.image()
    fleet.on_each_node(lambda node: node.import_image(img["archive"]))
    return str(img["name"]).rsplit(":", 1)[1]


def rolled_out(fleet: Fleet, name: str, count: int) -> None:
    """Until DaemonSet *name* has a Ready pod on *count* nodes; else a ClusterError with the pods'
    events and logs (an xdist worker's output is not shown)."""
    def done() -> bool:
        st = fleet.get("daemonset", name, "-n", NS).get("status", {})
        return (st.get("desiredNumberScheduled"), st.get("numberReady")) == (count, count)

    try:
        fleet.wait(done, 180, f"DaemonSet {name} ready on {count} nodes", interval=1)
    except ClusterError as err:
        report = [str(err)]
        for p in fleet.get("pods", "-n", NS, "-l", f"app.kubernetes.io/name={name}")["items"]:
            pod = p["metadata"]["name"]
            report.append(fleet.control.describe_pod(pod, NS)[-1500:])
            for c in p["spec"].get("initContainers", []) + p["spec"]["containers"]:
                r = fleet.kubectl("logs", pod, "-n", NS, "-c", c["name"], check=False)
                report.append(f"--- {pod} {c['name']}: {r.stdout[-1000:]}{r.stderr[-300:]}")
        raise ClusterError("\n".join(report)) from None


@pytest.fixture(scope="session")
def labelled(fleet: Fleet, image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """deploy/labels applied: the labeller on every node, each node labelled."""
    base = tmp_path_factory.mktemp("fleet-overlays")
    ops = ds_ops(DEPLOY / "labels" / "daemonset.yaml", "xpu-cdi-labeller",
                 {"labeller": FAKE_ROOTS + ["--uevents", "none", "--interval", "1"]}, {})
    d = overlay(base, "labels", DEPLOY / "labels", image, {"xpu-cdi-labeller": ops})
    fleet.kubectl("apply", "-k", str(d), timeout=180)
    try:
        rolled_out(fleet, "xpu-cdi-labeller", len(NODES))
        fleet.wait(lambda: all(fleet.labels(s.name).get(PRESENT) == "true" for s in NODES), 120,
                   "every node labelled present")
        yield base
    finally:
        fleet.kubectl("delete", "-k", str(d), "--ignore-not-found", "--wait=true", timeout=300, check=False)


@pytest.fixture(scope="session")
def deployed(fleet: Fleet, image: str, labelled: Path) -> Iterator[None]:
    """deploy/ applied (specs, device plugin, exporter) on the nodes labelled present; every node's
    cards allocatable."""
    roots = FAKE_ROOTS
    moves = {"host-lib-modules": f"{FAKE_ROOT}/lib/modules"}
    main = ds_ops(DEPLOY / "daemonset.yaml", "xpu-cdi", {
        "generate": roots, "watch": roots + ["--source", "none", "--poll-interval", "1"],
        "device-plugin": roots + ["--uevents", "none", "--health-interval", "0.5"]}, moves)
    exporter = ds_ops(DEPLOY / "exporter.yaml", "xpu-cdi-exporter", {"exporter": roots + ["--interval", "1"]}, {})
    for spec in NODES:
        fleet.hosts[spec.name].path("/lib/modules").mkdir(parents=True, exist_ok=True)
    d = overlay(labelled, "deploy", DEPLOY, image, {"xpu-cdi": main, "xpu-cdi-exporter": exporter})
    fleet.kubectl("apply", "-k", str(d), timeout=180)
    try:
        rolled_out(fleet, "xpu-cdi", len(NODES))
        rolled_out(fleet, "xpu-cdi-exporter", len(NODES))
        for spec in NODES:
            fleet.nodes[spec.name].wait_allocatable(spec.kind, spec.cards, timeout=120)
        yield None
    finally:
        fleet.kubectl("delete", "-k", str(d), "--ignore-not-found", "--wait=true", timeout=300, check=False)


