"""deploy/dra/ and deploy/exporter.yaml for real on the suite's node: the DRA driver's DaemonSet (its
RBAC, ValidatingAdmissionPolicy, DeviceClasses) and the exporter's, as pods of the image `make image`
builds (tests/support/imagebuild.py), imported into the node's containerd.

The node serves its kind by DRA: it is labelled ``xpu-cdi.io/kubernetes-allocation=dra`` (deploy/dra's
nodeSelector), its node config is the one deploy/dra's init container installs (no
/etc/xpu-cdi/config.yaml before), and no device-plugin DaemonSet runs.

What the overlays of the test change, and why (the rest is deploy/'s: images, init containers,
probes, security contexts, RBAC, the policy):

- the host paths the session keeps private: the spec dir containerd reads (the session's
  ``cdi_dir``), kubelet's plugin watcher, plugins and pod-resources directories (below the
  session's kubelet root dir), each mounted at the same path inside (kubelet connects to the socket
  path the driver registers), and the fake host's roots added to the commands (tests/support/k8s/
  dsnode.py's fake 8-card host, mounted at its own path);
- ``hostNetwork: true``: the node's network is loopback-only (tests/support/k8s/cluster.py), a pod of
  its own network namespace has no address kubelet's probes reach and no route to the API server;
  and, for the driver, ``KUBERNETES_SERVICE_HOST/PORT`` set to the API server's 127.0.0.1:6443
  (there is no kube-proxy for the ``kubernetes`` Service's address).  The driver still talks to
  the API server in-cluster, with its pod's service account token.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml

from support import fakehost
from support import imagebuild
from support import matrix
from support.dranode import DEPLOY as DRA_DEPLOY, DRIVER, allocated, claim_pod, claim_template
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.dsnode import (ACCEL_LABEL, CARDS, DEPLOY, EXPORTER, NS, XPU, Node, exporter_ops, label, same_path_ops,
                                unlabel, write_kustomization)
from xpu_cdi._version import VERSION
from xpu_cdi.dra.server import dra_socket, registration_socket

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

DS = "xpu-cdi-dra-driver"
ALLOCATION_LABEL = "xpu-cdi.io/kubernetes-allocation"
PORT = 28470


def overlay_dir(base: Path, name: str) -> Path:
    d = base / name
    d.mkdir()
    return d


class DraNode:
    """The fake host of dsnode.Node with deploy/dra/ (and, when asked, deploy/exporter.yaml) applied."""

    def __init__(self, cluster: Cluster, base: Path) -> None:
        self.cluster = cluster
        self.node = Node(cluster, base)  # the fake 8-card host
        self.host = self.node.host
        self.host.path("/lib/modules").mkdir(parents=True, exist_ok=True)
        self.dra_overlay = overlay_dir(base, "dra-overlay")
        self.exporter_overlay = overlay_dir(base, "exporter-overlay")

    @property
    def fake(self) -> str:
        return str(self.host.root)

    def apply_dra(self) -> None:
        c = self.cluster
        ds = next(d for d in yaml.safe_load_all((DRA_DEPLOY / "daemonset.yaml").read_text())
                  if d and d["kind"] == "DaemonSet")
        moves = {"host-cdi": str(c.cdi_dir), "kubelet-plugins-registry": str(c.plugins_registry_dir),
                 "kubelet-plugins": str(c.plugins_dir), "host-lib-modules": str(self.host.path("/lib/modules"))}
        roots = self.host.cli_roots
        ops = same_path_ops(
            ds, moves, self.fake,
            extra_args={"generate": roots, "watch": roots + ["--source", "none", "--poll-interval", "1"],
                        "dra-driver": roots + ["--registry-dir", str(c.plugins_registry_dir),
                                               "--plugins-dir", str(c.plugins_dir), "--health-interval", "0.5"]},
            arg_moves={"/var/run/cdi": str(c.cdi_dir)},
            env={"dra-driver": {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}},
            host_network=True)
        write_kustomization(self.dra_overlay, [os.path.relpath(DRA_DEPLOY, self.dra_overlay)], VERSION, {DS: ops})
        c.kubectl("apply", "-k", str(self.dra_overlay), timeout=180)

    def apply_exporter(self) -> None:
        """deploy/exporter.yaml (its DaemonSet and Service) on its own: deploy/kustomization.yaml also
        holds the device plugin's DaemonSet, which must not run on a DRA node.  kustomize loads no
        file from outside an overlay's dir: the overlay holds a copy of the file.  The fake host's
        xpu-smi prints the documented ``xpu-smi -m`` output (tests/data/exporter)."""
        c = self.cluster
        for f in ("serviceaccounts.yaml", "exporter.yaml"):  # the exporter runs as its own account
            shutil.copyfile(DEPLOY / f, self.exporter_overlay / f)
        write_kustomization(self.exporter_overlay, ["serviceaccounts.yaml", "exporter.yaml"], VERSION,
                            {EXPORTER: exporter_ops(c, self.host)})
        c.kubectl("apply", "-k", str(self.exporter_overlay), timeout=180)

    def pods(self, component: str) -> List[Dict[str, Any]]:
        return self.node.pods(component)

    def slices(self) -> List[Dict[str, Any]]:
        return self.cluster.get("resourceslices", "--show-managed-fields", "--field-selector",
                                f"spec.nodeName={self.cluster.node_name},spec.driver={DRIVER}")["items"]

    def sockets(self) -> List[str]:
        """The driver's sockets: kubelet's plugin watcher dir and its own plugins dir."""
        c = self.cluster
        found = list(c.plugins_registry_dir.glob("*.sock")) + list((c.plugins_dir / DRIVER).glob("*.sock"))
        return sorted(str(p) for p in found)

    def target(self) -> str:
        """``address:port`` of the exporter as Prometheus discovers it: the EndpointSlice of deploy/'s
        headless Service, its ``metrics`` port (the ServiceMonitor's endpoint), else ''."""
        slices = self.cluster.get("endpointslices", "-n", NS, "-l", f"kubernetes.io/service-name={EXPORTER}")
        found = [(a, p["port"]) for s in slices["items"] for e in s.get("endpoints") or []
                 if (e.get("conditions") or {}).get("ready") for a in e["addresses"]
                 for p in s.get("ports") or [] if p.get("name") == "metrics"]
        return f"{found[0][0]}:{found[0][1]}" if len(found) == 1 else ""

    def scrape(self, target: str) -> str:
        """GET /metrics of *target* as a client on the node's network would."""
        code = ("import sys, urllib.request; "
                f"sys.stdout.write(urllib.request.urlopen('http://{target}/metrics', timeout=10)"
                ".read().decode())")
        r = self.cluster.run_on_node([sys.executable, "-c", code], mount=False, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout


@pytest.fixture(scope="module")
def image(cluster: Cluster) -> Dict[str, Any]:
    img = imagebuild.image()
    cluster.import_image(img["archive"])
    return img


@pytest.fixture(scope="module")
def dra(cluster: Cluster, image: Dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DraNode]:
    assert cluster.kubectl("get", "daemonset", "xpu-cdi", "-n", NS, check=False).returncode != 0, \
        "the device plugin's DaemonSet runs: a node serves a kind one way only"
    n = DraNode(cluster, tmp_path_factory.mktemp("dra-ds"))
    cluster.run_on_node(["rm", "-rf", "/etc/xpu-cdi", "/run/xpu-cdi"])
    cluster.kubectl("label", "node", cluster.node_name, f"{ALLOCATION_LABEL}=dra", "--overwrite")
    assert label(cluster, n.host)[ACCEL_LABEL] == "true"  # the exporter's DaemonSet selects on it
    try:
        n.apply_dra()
        n.node.wait_rolled_out(VERSION, name=DS, component="dra-driver")
        yield n
    finally:
        for overlay in (n.exporter_overlay, n.dra_overlay):
            if (overlay / "kustomization.yaml").exists():
                cluster.kubectl("delete", "-k", str(overlay), "--ignore-not-found", "--wait=true", check=False,
                                timeout=180)
        cluster.kubectl("label", "node", cluster.node_name, f"{ALLOCATION_LABEL}-", check=False)
        unlabel(cluster)
        for f in cluster.cdi_dir.glob("kunlunxin.com-xpu*"):
            f.unlink()
        cluster.run_on_node(["rm", "-rf", "/etc/xpu-cdi", "/run/xpu-cdi"])
        shutil.rmtree(cluster.plugins_dir / DRIVER, ignore_errors=True)
        fakehost.remove_tree(n.host.root)
        shutil.rmtree(n.node.install_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def holder(cluster: Cluster, dra: DraNode) -> Iterator[Dict[str, Any]]:
    """A pod whose ResourceClaimTemplate asks for 2 cards (count: 2), Running; its name, view, cards."""
    tmpl = claim_template(cluster, {"count": 2})
    name = nodekit.unique("dra-two")
    try:
        out = nodekit.run_pod(cluster, claim_pod(name, tmpl))
        yield {"name": name, "out": out, "cards": allocated(cluster, name)}
    finally:
        nodekit.wait_gone(cluster, name)
        cluster.kubectl("delete", "resourceclaimtemplate", tmpl, "--ignore-not-found")


def test_dra_daemonset_ready_registered(cluster: Cluster, dra: DraNode) -> None:
    """Ready (its probe: registered and published); the node config deploy/dra installed is the
    DaemonSets' own, the node's label what gives the kind to DRA; kubelet's plugin watcher has the
    registration socket named after the pod's uid (hashed where the path would be too long: the
    session's root dir is), the driver's dir its DRA socket;
    kubelet took the registration (the status file the probe reads)."""
    (p,) = dra.pods("dra-driver")
    uid = p["metadata"]["uid"]
    cfg = cluster.run_on_node(["cat", "/etc/xpu-cdi/config.yaml"]).stdout
    # the DaemonSets' own node config (its first line says so), with no way of its own: the node's label
    # alone gives the kind to DRA (a node switched back to the plugin must not be refused by this file)
    assert cfg.startswith("# written by the xpu-cdi DaemonSets"), cfg
    assert "kubernetes-allocation" not in yaml.safe_load(cfg), cfg
    assert cluster.node()["metadata"]["labels"][ALLOCATION_LABEL] == "dra"
    assert dra.sockets() == sorted([registration_socket(str(cluster.plugins_registry_dir), DRIVER, uid),
                                    dra_socket(str(cluster.plugins_dir / DRIVER), uid)]), dra.sockets()
    status = yaml.safe_load(cluster.run_on_node(["cat", f"/run/xpu-cdi/dra-driver-{uid}.json"]).stdout)
    assert status["kinds"][XPU]["registered"] and status["kinds"][XPU]["published"], status


def test_slices_published_by_the_pods_service_account(cluster: Cluster, dra: DraNode) -> None:
    """The node's slice: one pool, the 8 cards, owned by the node, written by the driver; the pod's own
    token may not write another node's slice (deploy/dra's ValidatingAdmissionPolicy, reading the
    node name the pod-bound token carries)."""
    (s,) = dra.slices()
    assert sorted((d["name"] for d in s["spec"]["devices"]), key=int) == [str(i) for i in range(CARDS)]
    assert s["metadata"]["ownerReferences"][0]["uid"] == cluster.node()["metadata"]["uid"]
    assert {m["manager"] for m in s["metadata"]["managedFields"]} == {"xpu-cdi-dra-driver"}, s["metadata"]
    (p,) = dra.pods("dra-driver")
    forged = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "forged-slice"},
              "spec": {"driver": DRIVER, "nodeName": "other-node", "devices": [],
                       "pool": {"name": "other-node", "generation": 1, "resourceSliceCount": 1}}}
    code = ("import json, sys\nfrom xpu_cdi.kube.client import ApiError, Kube, slices_path\n"
            "k = Kube()\n"
            "try:\n    k.request('POST', slices_path(), body=json.loads(sys.argv[1])); print('created')\n"
            "except ApiError as e:\n    print(e.status, e)\n")
    r = cluster.kubectl("exec", "-n", NS, p["metadata"]["name"], "-c", "dra-driver", "--", "python3", "-c", code,
                        json.dumps(forged), timeout=60)
    assert "may only write that node's ResourceSlices, not 'other-node'" in r.stdout, r.stdout + r.stderr
    assert r.stdout.startswith(("403", "422")), r.stdout
    assert cluster.kubectl("get", "resourceslice", "forged-slice", check=False).returncode != 0


def test_pod_with_two_sees_exactly_them(cluster: Cluster, dra: DraNode, holder: Dict[str, Any]) -> None:
    """count: 2 → Running, its container has exactly the 2 cards allocated (ENXIO), the others absent."""
    assert len(holder["cards"]) == 2, holder["cards"]
    matrix.check_cards(holder["out"], holder["cards"])


@pytest.fixture(scope="module")
def exporter(cluster: Cluster, dra: DraNode) -> DraNode:
    dra.apply_exporter()
    dra.node.wait_rolled_out(VERSION, name=EXPORTER, component="metrics")
    return dra


def test_exporter_one_series_per_card_holder_labelled(cluster: Cluster, exporter: DraNode,
                                                      holder: Dict[str, Any]) -> None:
    """The exporter's DaemonSet Ready, its pod the one endpoint of the headless Service's ``metrics``
    port (what the ServiceMonitor and the scrape config discover); its /metrics there parsed by
    prometheus_client's own parser: one health and one allocation series per card with kind, card,
    pci_bus_id and model; the 2 cards of the DRA pod allocated and labelled with it (kubelet's
    PodResources API reports DRA claims), the others free; kubelet's source up."""
    from prometheus_client.parser import text_string_to_metric_families

    target = cluster.wait(exporter.target, 30, "the exporter's endpoint in its Service")
    assert target == f"{exporter.pods('metrics')[0]['status']['podIP']}:{PORT}", target

    def families() -> Any:
        fams = {f.name: f for f in text_string_to_metric_families(exporter.scrape(target))}
        alloc = fams.get("xpu_cdi_card_allocated")
        if alloc is None or sum(s.value for s in alloc.samples) != 2:
            return None
        return fams

    fams = cluster.wait(families, 30, "the exporter reporting the pod's 2 cards allocated", interval=1)
    health = fams["xpu_cdi_card_healthy"].samples
    assert sorted((s.labels["card"] for s in health), key=int) == [str(i) for i in range(CARDS)]
    for s in health:
        i = int(s.labels["card"])
        assert s.value == 1, s
        # xpu-smi tells no model (docs/monitoring.md): an empty label, no label to Prometheus
        assert {k: s.labels.get(k) for k in ("kind", "model", "pci_bus_id")} == \
            {"kind": XPU, "model": "", "pci_bus_id": exporter.host.pci[i]}, s
        assert not s.labels.get("pod") or i in holder["cards"], s
    alloc = {int(s.labels["card"]): s for s in fams["xpu_cdi_card_allocated"].samples}
    assert sorted(alloc) == list(range(CARDS))
    for i, s in alloc.items():
        if i in holder["cards"]:
            assert s.value == 1 and (s.labels.get("namespace"), s.labels.get("pod"), s.labels.get("container")) == \
                ("default", holder["name"], "c"), s
        else:
            assert s.value == 0 and not s.labels.get("pod") and not s.labels.get("namespace"), s
    up = {s.labels["source"]: s.value for s in fams["xpu_cdi_exporter_source_up"].samples}
    assert (up.get("pod-resources"), up.get("kunlunxin/xpu-smi")) == (1, 1), up
    # the fake xpu-smi's readings (tests/data/exporter/xpu-smi-m.txt: card i at 45 + i degrees C), run
    # by the exporter in its pod from the host's driver root
    temps = {int(s.labels["card"]): s.value for s in fams["xpu_cdi_card_temperature_celsius"].samples}
    assert temps == {i: 45 + i for i in range(CARDS)}, temps
    totals = {s.value for s in fams["xpu_cdi_card_memory_total_bytes"].samples}
    assert totals == {98304 * 2 ** 20}, totals


def test_delete_withdraws_slices_and_sockets(cluster: Cluster, dra: DraNode, holder: Dict[str, Any]) -> None:
    """Removal as docs/dra.md says (the holder pod gone first): the DaemonSet deleted first, its pod
    withdraws the node's slices itself as it stops (within 5 s of the pod gone), then `kubectl delete -k
    --ignore-not-found` removes the rest (RBAC, policy, DeviceClasses); no socket of the driver is left in kubelet's
    directories.  (`kubectl delete -k` alone removes the driver's ClusterRoleBinding with the
    DaemonSet: its withdrawal is refused with one log line, and kubelet wipes the slices of a driver
    that stays unregistered 30 s after it went: 31 s on this node.)"""
    nodekit.wait_gone(cluster, holder["name"])
    assert len(dra.pods("dra-driver")) == 1
    cluster.kubectl("delete", "daemonset", DS, "-n", NS, "--wait=true", timeout=120)
    cluster.wait(lambda: not dra.pods("dra-driver"), 120, "the driver's pod gone")
    gone = time.monotonic()
    cluster.wait(lambda: not dra.slices(), 5, "the node's slices withdrawn by the driver", interval=0.2)
    print(f"DaemonSet deleted: slices withdrawn {time.monotonic() - gone:.1f} s after the pod went")
    assert dra.sockets() == []
    cluster.kubectl("delete", "-k", str(dra.dra_overlay), "--ignore-not-found", "--wait=true", timeout=180)
    assert cluster.get("deviceclasses", "-l", "app.kubernetes.io/name=xpu-cdi")["items"] == []
    for kind, name in (("clusterrolebinding", DS), ("validatingadmissionpolicy", "xpu-cdi-dra-driver-own-node-slices")):
        assert cluster.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
