"""`xpu-cdi labels --daemon` on a real node: run on the machine (in the node's network namespace)
against the session cluster's API server as deploy/labels' service account, with a token bound to
a stand-in pod on the node (what the DaemonSet pod's token is), under deploy/labels' admission
policy; the cards are a fake 8-card Kunlunxin host.

What a user would check: the Node's labels (set, following a card that goes and a driver version
that changes, stale ones of ours removed, others' kept), and that the labeller's token is refused
for another node's labels and for a label outside xpu-cdi.io/.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from support import HANG, fakehost, kubeletkit, matrix
from support.dranode import Identity
from support.k8s.cluster import Cluster, ClusterError
from support.k8s.dsnode import node_labels, unlabel

pytestmark = [pytest.mark.privileged]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "labels"
SA = "xpu-cdi-labeller"
OTHER = "xpu-cdi-labels-other-node"


def test_deploy_labels_dry_run(cluster: Cluster) -> None:
    """deploy/labels/ (RBAC, the admission policy and its binding, the DaemonSet) passes the API
    server's validation and admission (the policy's CEL compiles), nothing stored."""
    r = cluster.kubectl("apply", "-k", str(DEPLOY), "--server-side", "--dry-run=server")
    assert r.stdout.count("(server dry run)") == 6, r.stdout
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/xpu-cdi-labeller-own-node-labels" in r.stdout
    got = cluster.kubectl("get", "validatingadmissionpolicy", "xpu-cdi-labeller-own-node-labels", check=False)
    assert got.returncode != 0, "the dry run stored the policy"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fakehost.FakeHost]:
    h = fakehost.kunlunxin(matrix.device_dir(tmp_path_factory.mktemp("labels")) / "host", 8)
    yield h
    fakehost.remove_tree(h.root)


@pytest.fixture(scope="module")
def identity(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identity]:
    i = Identity(cluster, tmp_path_factory.mktemp("labels-id"), manifests=(DEPLOY / "rbac.yaml",), sa=SA)
    try:
        yield i
    finally:
        i.close()


def expected(host: fakehost.FakeHost) -> Dict[str, str]:
    """What `xpu-cdi labels` prints for the host now (the labeller must bring the node to it)."""
    r = subprocess.run([matrix.XPU_CDI, "labels", "--profile", "kunlunxin", "--profiles-dir", "/nonexistent",
                        *host.cli_roots, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out: Dict[str, str] = json.loads(r.stdout)
    return out


@pytest.fixture(scope="module")
def labeller(cluster: Cluster, host: fakehost.FakeHost, identity: Identity,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubeletkit.PluginProcess]:
    cluster.kubectl("label", "node", cluster.node_name, "team=inference", "xpu-cdi.io/xpu.stale=1", "--overwrite")
    args = ["--profile", "kunlunxin", "--profiles-dir", "/nonexistent", *host.cli_roots, "--daemon",
            "--node", cluster.node_name, "--kubeconfig", str(identity.kubeconfig), "--interval", "0.5",
            "--uevents", "none", "--removal-grace", "0"]
    p = kubeletkit.PluginProcess("pypi", args, tmp_path_factory.mktemp("labeller") / "labeller.log",
                                 command="labels", prefix=cluster.on_node([], mount=False))
    try:
        yield p
    finally:
        p.stop()
        print(f"the labeller's log:\n{p.text()}")
        unlabel(cluster)
        cluster.kubectl("label", "node", cluster.node_name, "team-", check=False)


def wait_labels(cluster: Cluster, want: Dict[str, str], what: str) -> None:
    """Until the node's xpu-cdi.io/ labels are *want*; a timeout names the difference."""
    seen: Dict[str, str] = {}

    def arrived() -> bool:
        seen.clear()
        seen.update(node_labels(cluster))
        return seen == want

    try:
        cluster.wait(arrived, HANG, what)
    except ClusterError as err:
        extra = {k: v for k, v in seen.items() if want.get(k) != v}
        missing = {k: v for k, v in want.items() if seen.get(k) != v}
        raise AssertionError(f"{err}: the node has {extra} beyond what is wanted, lacks {missing}") from None


def test_labels_set_on_the_node(cluster: Cluster, host: fakehost.FakeHost,
                                labeller: kubeletkit.PluginProcess) -> None:
    """The node gets every label `xpu-cdi labels` computes (model, count, topology groups); the stale
    label of ours is removed, a label of someone else's stays."""
    want = expected(host)
    assert want["xpu-cdi.io/xpu.model"] == "P800" and want["xpu-cdi.io/xpu.switch-groups"] == "0-3_4-7", want
    wait_labels(cluster, want, "the node labelled")
    assert cluster.node()["metadata"]["labels"]["team"] == "inference"


def test_card_gone_labels_follow(cluster: Cluster, host: fakehost.FakeHost,
                                 labeller: kubeletkit.PluginProcess) -> None:
    wait_labels(cluster, expected(host), "the node labelled")
    host.path("/dev/xpu7").unlink()
    t0 = time.monotonic()
    want = expected(host)
    assert want["xpu-cdi.io/xpu.count"] == "7" and want["xpu-cdi.io/xpu.switch-groups"] == "0-3_4-6", want
    wait_labels(cluster, want, "count 7 on the node")
    print(f"card removed -> the node's labels follow: {time.monotonic() - t0:.2f}s")  # the figure in the report


def test_driver_version_follows(cluster: Cluster, host: fakehost.FakeHost,
                                labeller: kubeletkit.PluginProcess) -> None:
    version = host.path("/proc/xpu/version")
    version.write_text("5.1.3\n")
    try:
        want = expected(host)
        assert want["xpu-cdi.io/xpu.driver-version"] == "5.1.3", want
        wait_labels(cluster, want, "the new driver version on the node")
    finally:
        version.write_text(f"{fakehost.XRE_VERSION}\n")


def as_labeller(cluster: Cluster, identity: Identity, *args: str) -> subprocess.CompletedProcess:
    return cluster.run_on_node([str(cluster.kubectl_bin), "--kubeconfig", str(identity.kubeconfig), *args],
                               mount=False)


def test_token_refused_for_another_node_and_foreign_labels(cluster: Cluster, identity: Identity,
                                                           labeller: kubeletkit.PluginProcess) -> None:
    """deploy/labels' admission policy: the labeller's token may not label another Node (one made by
    the API for this), nor change a label outside xpu-cdi.io/ on its own; ours on its own it may."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": OTHER, "labels": {"team": "training"}}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(node))
    try:
        r = as_labeller(cluster, identity, "label", "node", OTHER, "xpu-cdi.io/xpu.count=8")
        assert r.returncode != 0 and "ValidatingAdmissionPolicy" in r.stderr, r.stderr
        assert f"runs on node '{cluster.node_name}'" in r.stderr and f"not '{OTHER}'" in r.stderr, r.stderr
        r = as_labeller(cluster, identity, "label", "node", OTHER, "team-")
        assert r.returncode != 0 and "ValidatingAdmissionPolicy" in r.stderr, r.stderr
        other = json.loads(cluster.kubectl("get", "node", OTHER, "-o", "json").stdout)
        assert other["metadata"]["labels"] == {"team": "training"}, other["metadata"]["labels"]
    finally:
        cluster.kubectl("delete", "node", OTHER, "--ignore-not-found")
    r = as_labeller(cluster, identity, "label", "node", cluster.node_name, "team=hijacked", "--overwrite")
    assert r.returncode != 0 and "may change only its labels under xpu-cdi.io/, not team" in r.stderr, r.stderr
    r = as_labeller(cluster, identity, "label", "node", cluster.node_name, "xpu-cdi.io/kubernetes-allocation=dra")
    assert r.returncode != 0 and "not xpu-cdi.io/kubernetes-allocation" in r.stderr, r.stderr  # the admin's
    r = as_labeller(cluster, identity, "annotate", "node", cluster.node_name, "x=1")
    assert r.returncode != 0 and "ValidatingAdmissionPolicy" in r.stderr, r.stderr
    assert cluster.node()["metadata"]["labels"]["team"] == "inference"
    r = as_labeller(cluster, identity, "label", "node", cluster.node_name, "xpu-cdi.io/xpu.probe=1")
    assert r.returncode == 0, r.stderr


def test_all_cards_gone_labels_removed(cluster: Cluster, host: fakehost.FakeHost,
                                       labeller: kubeletkit.PluginProcess) -> None:
    """No card of ours left (--removal-grace 0): every xpu-cdi.io/ label goes, team stays."""
    for node in host.path("/dev").glob("xpu[0-9]*"):
        node.unlink()
    wait_labels(cluster, {}, "no xpu-cdi.io/ label left")
    assert cluster.node()["metadata"]["labels"]["team"] == "inference"
