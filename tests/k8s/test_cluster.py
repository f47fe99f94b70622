"""The one-node cluster itself: the pinned releases run, the node is Ready, a pod placed by the
real scheduler runs on the real kubelet and containerd 2.x, and nothing of it reaches the
machine's own network, sysctls or paths."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from support.k8s import builds
from support.k8s import nodekit
from support import HANG
from support.k8s.cluster import CGROUP, KUBELET_TUNABLES, SUPPORT_PARENT, Cluster, host_paths_snapshot

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]


def test_versions(cluster: Cluster) -> None:
    """The node reports the pinned kubelet and containerd; the API server the pinned release."""
    info = cluster.node()["status"]["nodeInfo"]
    assert info["kubeletVersion"] == builds.COMPONENTS["kubernetes"].version()
    assert info["containerRuntimeVersion"].startswith("containerd://" + builds.COMPONENTS["containerd"].version()[1:])
    server = cluster.get_raw("/version")
    assert server["gitVersion"] == builds.COMPONENTS["kubernetes"].version()


def test_node_ready_and_schedulable(cluster: Cluster) -> None:
    node = cluster.node()
    assert cluster.node_ready(node)
    assert not node["spec"].get("unschedulable") and not node["spec"].get("taints"), node["spec"]
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == cluster.node_ip


def test_busybox_pod_runs(cluster: Cluster) -> None:
    """Scheduled by kube-scheduler, started by kubelet through containerd's CRI, with the service
    account token kube-controller-manager's controllers make possible; its output via the API
    server from kubelet (kubectl logs)."""
    name = nodekit.unique("bb")
    cluster.apply(nodekit.pod(name, ["sh", "-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; "
                                                 "echo; echo hello from $(hostname); exec sleep 2147483647"]))
    try:
        p = cluster.wait_pod_phase(name, "Running")
        assert p["spec"]["nodeName"] == cluster.node_name
        out = cluster.wait(lambda: (lambda o: o if "hello" in o else None)(cluster.logs(name)), 60, "its output")
        assert out.splitlines()[0] == "default", out
    finally:
        nodekit.wait_gone(cluster, name)


def enabled_gates(metrics: str) -> Dict[str, bool]:
    """``kubernetes_feature_enabled{name="X",stage="..."} 1`` lines of a component's /metrics."""
    return {m.group(1): m.group(2) == "1" for m in
            re.finditer(r'^kubernetes_feature_enabled\{name="(\w+)"[^}]*\} (\d)', metrics, re.M)}


def test_feature_gates(cluster: Cluster) -> None:
    """The gates the session's cluster sets are on in the API server and in kubelet (their
    /metrics say so), and DRA's resource.k8s.io/v1 is served."""
    api = enabled_gates(cluster.kubectl("get", "--raw", "/metrics").stdout)
    node = enabled_gates(cluster.kubectl("get", "--raw", f"/api/v1/nodes/{cluster.node_name}/proxy/metrics").stdout)
    for gate, on in nodekit.FEATURE_GATES.items():
        assert api.get(gate) is on and node.get(gate) is on, (gate, api.get(gate), node.get(gate))
    resources = {r["name"] for r in cluster.get_raw("/apis/resource.k8s.io/v1")["resources"]}
    assert {"resourceclaims", "resourceslices", "deviceclasses"} <= resources, resources


def test_machine_untouched(cluster: Cluster) -> None:
    """kubelet's iptables chains, its kernel tunables and the paths kubelet and containerd
    hard-code stay in the node's namespaces; every daemon listens in the node's network namespace
    (their fixed ports, etcd's 2379 or the API server's 6443, cannot meet another cluster's)."""
    assert cluster.holder is not None
    node_net = os.readlink(f"/proc/{cluster.holder.pid}/ns/net")
    assert node_net != os.readlink("/proc/self/ns/net")
    for name, daemon in cluster.daemons.items():
        assert daemon.proc is not None and os.readlink(f"/proc/{daemon.proc.pid}/ns/net") == node_net, name
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert "KUBE-" not in rules, rules
    node_rules = cluster.run_on_node(["iptables", "-S"], mount=False).stdout
    assert "KUBE-FIREWALL" in node_rules, node_rules  # the node's namespace got them instead
    for path, want in KUBELET_TUNABLES.items():
        seen = cluster.run_on_node(["cat", f"/proc/sys/{path}"]).stdout.strip()
        assert seen == want, (path, seen)
    # with a pod running, none of its containers (sandbox included) is named below the machine's
    # own paths (other tests' daemons may write to /run/containerd meanwhile: only our IDs count)
    name = nodekit.unique("bb")
    cluster.apply(nodekit.pod(name, ["sleep", "2147483647"]))
    try:
        cluster.wait_pod_phase(name, "Running")
        ids = set(cluster.ctr("containers", "ls", "-q").stdout.split())
        assert len(ids) >= 2, ids
        for top, names in host_paths_snapshot().items():
            ours = [n for n in names if any(i in n for i in ids) or name in n]
            assert not ours, (top, ours)
    finally:
        nodekit.wait_gone(cluster, name)


def test_image_import(cluster: Cluster, tmp_path: Path) -> None:
    """import_image puts an OCI archive where CRI (and so kubelet) finds it."""
    images = cluster.ctr("image", "ls", "-q").stdout.split()
    assert "localhost/xpu-cdi-busybox:latest" in images and "localhost/xpu-cdi-pause:3.10.2" in images, images


#: A second cluster, started in a process of its own that then waits to be killed.
OWNER = """
import json, signal, subprocess
from support.k8s.cluster import Cluster
c = Cluster().start()
sleeper = subprocess.Popen(["sleep", "2147483647"])  # a process a test runs against the node
c.adopt(sleeper.pid)
print(json.dumps({"base": str(c.base), "cgroup": c.cgroup_name, "reaper": c.reaper.pid,
                  "pids": [c.holder.pid, sleeper.pid, *(d.proc.pid for d in c.daemons.values())]}), flush=True)
signal.pause()
"""


def test_owner_killed_cluster_reaped(cluster: Cluster, tmp_path: Path) -> None:
    """A second cluster beside the session's, whose owner is killed by SIGTERM (a CI cancel,
    ``timeout``) before it could stop it: its reaper kills every process of it (daemons, pods,
    an adopted process), removes its cgroups and its directory."""
    env = dict(os.environ, PYTHONPATH=str(SUPPORT_PARENT))
    with open(tmp_path / "owner.log", "wb") as err:
        owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, stderr=err, env=env)
    try:
        assert owner.stdout is not None
        # a bound on a hang only: the start waits for the builds' lock and the node Ready
        ready, _w, _x = select.select([owner.stdout], [], [], 20 * HANG)
        line = owner.stdout.readline() if ready else b""
        assert line, (tmp_path / "owner.log").read_text(errors="replace")
        got = json.loads(line)
        reaper = os.pidfd_open(got["reaper"])
        alive = {pid: os.pidfd_open(pid) for pid in got["pids"]}
        assert Path(got["base"]).is_dir() and (CGROUP / "pids" / got["cgroup"]).is_dir()
        owner.send_signal(signal.SIGTERM)
        assert owner.wait(HANG) == -signal.SIGTERM
        assert select.select([reaper], [], [], HANG)[0], "the reaper still running"
        for pid, fd in alive.items():
            assert select.select([fd], [], [], 0)[0], f"process {pid} of the cluster left running"
        assert not [str(d) for d in CGROUP.glob(f"*/{got['cgroup']}")]
        assert not Path(got["base"]).exists()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
