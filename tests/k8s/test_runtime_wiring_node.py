"""The optional runtime wiring (deploy/runtime-wiring) on a real node: a cluster of its own
whose containerd (2.x, the suite's build) runs under a supervisor that starts it again when
it exits, as systemd's ``Restart=always`` does on a host (the session's shared cluster has
none, and a restart there would leave it without a runtime).

deploy/ plus the component, through the overlay of tests/support/k8s/dsnode.py (the wiring's
containerd paths moved to the session's containerd): the wiring pod finds the node's
containerd in the host's process table, writes the drop-in and restarts it; the node stays
Ready, a pod running since before keeps its container (same ID, no restart, exec works);
afterwards a card pod on RuntimeClass ``xpu`` runs through the handler the wiring added, the
wrapper install-binaries installed.  A second wiring pod (a rollout) restarts nothing.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from typing import Any, Dict, Iterator, Optional

import pytest

from support import fakehost
from support import imagebuild
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.dsnode import ACCEL_LABEL, NS, WIRING_DS, Node, label, unlabel
from xpu_cdi._version import VERSION
from xpu_cdi.host import wiring

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
RUNTIME_LABEL = "xpu-cdi.io/runtime-xpu"


class SupervisedCluster(Cluster):
    """The suite's cluster with containerd under a restart loop (a stand-in for systemd's Restart=always)."""

    def _run(self, name: str, argv: Any, env: Optional[Dict[str, str]] = None) -> Any:
        if name == "containerd":
            argv = ["sh", "-c", 'while :; do "$@"; sleep 1; done', "supervise", *argv]
        return super()._run(name, argv, env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:

    c = SupervisedCluster(configure_containerd=nodekit.runtime_configure)
    c.containerd_env["XPU_CDI_SPEC_DIRS"] = str(c.cdi_dir)
    c.start()
    try:
        yield c
    finally:
        c.stop(keep_logs=tmp_path_factory.mktemp("wiring-cluster-logs"))


def containerd_pid(cluster: Cluster) -> int:
    (p,) = wiring.find_containerd(str(cluster.containerd_config))
    return p.pid


@pytest.fixture(scope="module")
def node(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    for img in (imagebuild.image(), imagebuild.second_version()):
        cluster.import_image(img["archive"])
    n = Node(cluster, tmp_path_factory.mktemp("wiring"))
    assert label(cluster, n.host)[ACCEL_LABEL] == "true"
    try:
        yield n
    finally:
        unlabel(cluster)
        cluster.kubectl("delete", "-k", str(n.overlay), "--ignore-not-found", "--wait=true", check=False, timeout=180)
        fakehost.remove_tree(n.host.root)
        shutil.rmtree(n.install_dir, ignore_errors=True)


def wiring_log(node: Node) -> str:
    (p,) = node.pods("runtime-wiring")
    return node.cluster.logs(p["metadata"]["name"], "wire-runtime", NS)


def test_wiring_restarts_containerd_and_running_pods_stay(node: Node) -> None:
    cluster = node.cluster
    before = nodekit.unique("before")
    cluster.apply(nodekit.pod(before, ["sh", "-c", "echo up; exec sleep 2147483647"]))
    cluster.wait_pod_phase(before, "Running", 120)
    first = cluster.pod(before)["status"]["containerStatuses"][0]
    old_pid = containerd_pid(cluster)

    node.apply(VERSION, wiring=True)
    node.wait_rolled_out(VERSION)
    node.wait_rolled_out(VERSION, name=WIRING_DS, component="runtime-wiring")
    log = wiring_log(node)
    m = re.search(r"containerd (\d+\.\d+\.\d+) is back \(pid (\d+) -> (\d+)\) after", log)
    assert m and int(m.group(2)) == old_pid, log
    assert containerd_pid(cluster) == int(m.group(3)) != old_pid
    assert f"wrote {cluster.containerd_config.parent}/conf.d/99-xpu-cdi.toml" in log, log

    assert cluster.node_ready()
    now = cluster.pod(before)["status"]["containerStatuses"][0]
    assert (now["containerID"], now["restartCount"], "running" in now["state"]) == \
        (first["containerID"], 0, True), now
    r = cluster.kubectl("exec", before, "--", "echo", "still-here")
    assert r.stdout.strip() == "still-here"
    drop_in = (cluster.containerd_config.parent / "conf.d" / "99-xpu-cdi.toml").read_text()
    assert f'BinaryName = "{node.install_dir}/bin/xpu-container-runtime"' in drop_in, drop_in
    nodekit.wait_gone(cluster, before)


def test_runtimeclass_xpu_runs_the_installed_wrapper(node: Node) -> None:
    """After the wiring: RuntimeClass xpu (deploy/runtimeclass.yaml, node labelled) runs a card pod with the
    handler whose runc binary is the wrapper install-binaries put on the host."""
    cluster = node.cluster
    cluster.kubectl("label", "node", cluster.node_name, f"{RUNTIME_LABEL}=true", "--overwrite")
    try:
        cluster.wait_allocatable(nodekit.XPU, 8, timeout=60)
        name = nodekit.unique("rc")
        out = nodekit.run_card_pod(cluster, name, {nodekit.XPU: 1}, runtime_class="xpu")
        assert len(nodekit.cards_seen(out)) == 1, out
        binaries = []
        for cid in cluster.ctr("containers", "ls", "-q").stdout.split():
            info = json.loads(cluster.ctr("containers", "info", cid).stdout)
            if info.get("Labels", {}).get("io.kubernetes.pod.name") == name:
                # the runc shim's options (BinaryName among them), protobuf in base64
                binaries.append(base64.b64decode(info["Runtime"]["Options"]["value"]))
        wrapper = f"{node.install_dir}/bin/xpu-container-runtime".encode()
        assert binaries and all(wrapper in b for b in binaries), binaries
        nodekit.wait_gone(cluster, name)
    finally:
        cluster.kubectl("label", "node", cluster.node_name, f"{RUNTIME_LABEL}-", check=False)


def test_a_second_wiring_pod_restarts_nothing(node: Node) -> None:
    """The wiring DaemonSet rolled to another image: its new pod finds the files older than the running
    containerd and leaves it alone."""
    pid = containerd_pid(node.cluster)
    node.apply(f"{VERSION}-v2", wiring=True)
    node.wait_rolled_out(f"{VERSION}-v2", name=WIRING_DS, component="runtime-wiring")
    node.wait_rolled_out(f"{VERSION}-v2")
    assert "runs with this configuration already: no restart" in wiring_log(node)
    assert containerd_pid(node.cluster) == pid
