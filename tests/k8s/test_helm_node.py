"""The Helm chart (deploy/chart/xpu-cdi) for real on the suite's node, with the suite's helm (built
from helm.sh/helm/v4 at its pin) and the image `make image` builds, imported with ctr.

- every values combination of support.helmchart.COMBINATIONS, rendered by `helm template`, passes a
  server-side dry run on the real API server (the Prometheus operator's two kinds get stand-in
  CRDs of the test's own: no operator runs here);
- `helm install` gives Ready DaemonSets (device plugin, exporter) and a pod with exactly its two
  cards; `helm upgrade` to a second image rolls with no failed pod or container; `helm rollback`
  brings the first image back; `helm upgrade` with time-slicing (4 replicas) rolls the plugin's pod
  and gives allocatable 32 for the 8 cards; `helm uninstall` leaves what docs/helm.md lists and
  nothing else;
- `helm upgrade` with the values users bring from NVIDIA's and HAMi's charts (pull secrets, global
  registry, pod labels and annotations, affinity, per-DaemonSet selector, tolerations, update
  strategy, priority class): each on the pods, which run and serve cards;
- `helm upgrade` with devicePlugin.config.map: the node label xpu-cdi.io/device-plugin-config picks a named
  config (4 replicas: allocatable 32), an unknown name keeps it, no label brings the default back;
- `helm install` with devicePlugin.resourceNaming=model on an Ascend 310P host gives the model's
  resource (huawei.com/Ascend310P), as mind-cluster's plugin names it, and a pod with two of them.

The host paths the session keeps private are moved by a post-renderer plugin of the test's own
(tests/support/k8s/helmnode.py), exactly as deploy/'s overlay moves them in test_daemonset_node.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml

from support import fakehost, helmchart, imagebuild, matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.dsnode import ACCEL_LABEL, CARDS, DS, EXPORTER, NS, XPU, two_cards
from support.k8s.helmnode import HelmNode
from xpu_cdi._version import VERSION

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]

RELEASE = helmchart.RELEASE
DOCS = helmchart.REPO / "docs" / "helm.md"
# what docs/helm.md's "Uninstall: what stays" names on the node
DOCUMENTED = ["/usr/local/xpu-cdi/bin/xpu-cdi-hook", "xpu-container-runtime", "/var/run/cdi", ".xpu-cdi",
              "/etc/xpu-cdi/config.yaml", "/etc/xpu-cdi/profiles.d", "/run/xpu-cdi/serve-<kind>.lock",
              "serve-<kind>.device-plugin.lock"]
# stand-ins for the Prometheus operator's CRDs (their schemas are the operator's; the dry run checks
# the objects' shape, names and namespaces against the API server, not the operator's fields)
OPERATOR_KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


def stand_in_crd(kind: str, plural: str) -> Dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.monitoring.coreos.com", "labels": {"xpu-cdi.test": "stand-in"}},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                       "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.fixture(scope="module")
def dry_run_api(cluster: Cluster) -> Iterator[Cluster]:
    """The API server with the stand-in CRDs and the other namespace of the combinations."""
    cluster.apply(*(stand_in_crd(k, p) for k, p in OPERATOR_KINDS.items()))
    for p in OPERATOR_KINDS.values():
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{p}.monitoring.coreos.com", "--timeout=60s")
    cluster.kubectl("create", "namespace", "xpu-cdi-test")
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "namespace", "xpu-cdi-test", "--wait=false", check=False)
        cluster.kubectl("delete", "crd", "-l", "xpu-cdi.test=stand-in", "--wait=true", check=False)


@pytest.mark.parametrize("name", helmchart.COMBINATIONS)
def test_each_combination_passes_a_server_side_dry_run(dry_run_api: Cluster, name: str) -> None:
    """Every object `helm template` renders is accepted by the real API server (schema, names,
    admission), none created."""
    r = helmchart.template(helmchart.COMBINATIONS[name])
    assert r.returncode == 0, r.stderr
    objs = [d for d in yaml.safe_load_all(r.stdout) if d]
    out = dry_run_api.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server",
                              "--field-manager=xpu-cdi-dry-run", "-f", "-", input=r.stdout)
    applied = [ln for ln in out.stdout.splitlines() if "serverside-applied (server dry run)" in ln]
    assert len(applied) == len(objs), (out.stdout, [o["kind"] for o in objs])
    assert dry_run_api.kubectl("get", "daemonsets", "-A", "-l", "app.kubernetes.io/name=xpu-cdi",
                               "-o", "name").stdout.strip() == ""


@pytest.fixture(scope="module")
def node(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HelmNode]:
    """`helm install` of the chart's defaults (device plugin and exporter) on the labelled node."""
    for img in (imagebuild.image(), imagebuild.second_version()):
        cluster.import_image(img["archive"])
    n = HelmNode(cluster, tmp_path_factory.mktemp("helm"))
    n.before = n.listing()  # type: ignore[attr-defined]
    cluster.kubectl("label", "node", cluster.node_name, f"{ACCEL_LABEL}=true", "--overwrite")
    try:
        n.helm("install", RELEASE, *n.chart_args(VERSION), "--namespace", NS, "--wait", "--timeout", "5m")
        n.wait_rolled_out(VERSION)
        n.wait_rolled_out(VERSION, name=EXPORTER, component="metrics")
        yield n
    finally:
        n.clean(NS)


@pytest.fixture
def pods(cluster: Cluster) -> Iterator[List[str]]:
    names: List[str] = []
    yield names
    if names:
        nodekit.wait_gone(cluster, *names)


def test_install_ready_daemonsets_and_a_pod_with_its_cards(node: HelmNode, pods: List[str]) -> None:
    for name in (DS, EXPORTER):
        st = node.ds(name)["status"]
        assert (st.get("desiredNumberScheduled"), st.get("numberReady")) == (1, 1), (name, st)
    status = node.helm("status", RELEASE, "-n", NS).stdout
    assert re.search(r"^STATUS: deployed$", status, re.M) and re.search(r"^REVISION: 1$", status, re.M), status
    node.cluster.wait_allocatable(XPU, CARDS, timeout=60)
    name = nodekit.unique("helm")
    pods.append(name)
    two_cards(node.cluster, name)


class Watch:
    """Polls the release's pods while it rolls: any pod (not being deleted) Failed, or a container of
    it restarted, terminated with an error or waiting in an error state, is recorded."""

    BAD = {"CrashLoopBackOff", "Error", "CreateContainerError", "RunContainerError", "StartError",
           "CreateContainerConfigError", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull"}

    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.bad, self.seen = cluster, [], set()  # type: ignore[var-annotated]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        while not self.stop.wait(0.5):
            for p in self.cluster.get("pods", "-n", NS, "-l", "app.kubernetes.io/name in (xpu-cdi,xpu-cdi-exporter)")[
                    "items"]:
                self.seen.add(p["metadata"]["name"])
                if p["metadata"].get("deletionTimestamp"):
                    continue  # the old pod, stopped by the roll: its containers end as they are told
                st = p.get("status", {})
                if st.get("phase") == "Failed":
                    self.bad.append((p["metadata"]["name"], "Failed", st.get("reason")))
                for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", []):
                    state = cs.get("state", {})
                    term = state.get("terminated") or cs.get("lastState", {}).get("terminated") or {}
                    why = state.get("waiting", {}).get("reason")
                    if cs.get("restartCount", 0) > 0 or why in self.BAD or term.get("exitCode", 0) != 0:
                        self.bad.append((p["metadata"]["name"], cs["name"], why, term.get("exitCode"),
                                         cs.get("restartCount")))

    def __enter__(self) -> "Watch":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def test_upgrade_to_a_second_image_rolls_with_no_failed_pod(node: HelmNode, pods: List[str]) -> None:
    """`helm upgrade` to the second image: both DaemonSets roll to it, no pod or container of theirs
    fails on the way, the host's hook is the new one, and cards still reach pods."""
    old_hook = (node.install_dir / "bin" / "xpu-cdi-hook").stat().st_ino
    with Watch(node.cluster) as w:
        node.helm("upgrade", RELEASE, *node.chart_args(f"{VERSION}-v2"), "--namespace", NS, "--wait",
                  "--timeout", "5m")
        node.wait_rolled_out(f"{VERSION}-v2")
        node.wait_rolled_out(f"{VERSION}-v2", name=EXPORTER, component="metrics")
    assert w.bad == [] and len(w.seen) >= 4, (w.bad, w.seen)  # the old and the new pod of each
    new = node.install_dir / "bin" / "xpu-cdi-hook"
    assert new.stat().st_ino != old_hook and new.read_bytes().endswith(b"second version\0")
    assert re.search(r"^REVISION: 2$", node.helm("status", RELEASE, "-n", NS).stdout, re.M)
    name = nodekit.unique("helm")
    pods.append(name)
    two_cards(node.cluster, name)


def test_rollback_brings_the_first_image_back(node: HelmNode) -> None:
    with Watch(node.cluster) as w:
        node.helm("rollback", RELEASE, "1", "--namespace", NS, "--wait", "--timeout", "5m")
        node.wait_rolled_out(VERSION)
        node.wait_rolled_out(VERSION, name=EXPORTER, component="metrics")
    assert w.bad == [], w.bad
    assert not (node.install_dir / "bin" / "xpu-cdi-hook").read_bytes().endswith(b"second version\0")
    history = node.helm("history", RELEASE, "-n", NS, "-o", "yaml").stdout
    revs = yaml.safe_load(history)
    assert [(r["revision"], r["status"]) for r in revs] == [(1, "superseded"), (2, "superseded"), (3, "deployed")]
    assert revs[-1]["description"] == "Rollback to 1"


REPLICAS = 4


def values_file(values: Dict[str, Any], where: Path) -> str:
    path = where / "values.json"
    path.write_text(json.dumps(values))
    return str(path)


def test_time_slicing_upgrade_rolls_the_plugin(node: HelmNode, pods: List[str]) -> None:
    """`helm upgrade` with devicePlugin.sharing (4 replicas of each card): the new config file rolls the
    plugin's pod (its checksum annotation changed), no pod fails on the way, kubelet's capacity and
    allocatable become 32 for the 8 cards, and a pod with one replica sees one card."""
    cluster = node.cluster
    (old,) = node.pods()
    values = {"devicePlugin": {"sharing": {"timeSlicing": {"resources": [{"name": XPU, "replicas": REPLICAS}]}}}}
    with tempfile.TemporaryDirectory() as d, Watch(cluster) as w:
        node.helm("upgrade", RELEASE, *node.chart_args(VERSION), "--values", values_file(values, Path(d)),
                  "--namespace", NS, "--wait", "--timeout", "5m")
        new = node.wait_rolled_out(VERSION)
    assert w.bad == [], w.bad
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    key = "xpu-cdi.io/device-plugin-config"
    assert new["metadata"]["annotations"][key] != old["metadata"]["annotations"][key]
    cluster.wait_allocatable(XPU, CARDS * REPLICAS, timeout=60)
    assert cluster.capacity(XPU) == CARDS * REPLICAS
    name = nodekit.unique("helm-ts")
    pods.append(name)
    out = nodekit.run_card_pod(cluster, name, {XPU: 1})
    podres = nodekit.PodResources(cluster)
    try:
        (replica,) = podres.devices(name, XPU)
    finally:
        podres.close()
    assert re.fullmatch(r"[0-7]::[0-3]", replica), replica
    matrix.check_cards(out, [int(replica.split("::")[0])])


CONFIG_LABEL = "xpu-cdi.io/device-plugin-config"
SIDECAR = "device-plugin-config"


def test_a_node_label_picks_the_plugins_config(node: HelmNode) -> None:
    """devicePlugin.config.map with a config of 4 replicas: the node labelled with its name serves it
    (allocatable 32), an unknown name keeps it (one warning line in the sidecar's log), the label
    removed brings the default back (8); nothing fails or restarts on the way.  The sidecar's account
    may read Nodes and nothing else."""
    cluster = node.cluster
    values = {"devicePlugin": {"config": {"map": {"shared-4": {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": XPU, "replicas": REPLICAS}]}}}}}}}
    user = f"system:serviceaccount:{NS}:xpu-cdi-device-plugin-config"
    node.api_env({"initContainers": [f"{SIDECAR}-init"], "containers": [SIDECAR]})
    try:
        with tempfile.TemporaryDirectory() as d, Watch(cluster) as w:
            node.helm("upgrade", RELEASE, *node.chart_args(VERSION), "--values", values_file(values, Path(d)),
                      "--namespace", NS, "--wait", "--timeout", "5m")
            pod = node.wait_rolled_out(VERSION)
            assert {c["name"] for c in pod["spec"]["containers"]} == {"watch", "device-plugin", SIDECAR}
            cluster.wait_allocatable(XPU, CARDS, timeout=60)
            name = pod["metadata"]["name"]

            def said(text: str) -> Any:
                return text in cluster.logs(name, SIDECAR, namespace=NS)

            cluster.kubectl("label", "node", cluster.node_name, f"{CONFIG_LABEL}=shared-4", "--overwrite")
            took = cluster.wait_allocatable(XPU, CARDS * REPLICAS, timeout=60)
            cluster.kubectl("label", "node", cluster.node_name, f"{CONFIG_LABEL}=typo", "--overwrite")
            cluster.wait(lambda: said(f"{CONFIG_LABEL}=typo: no config named 'typo'"), 60, "the unknown name said")
            assert said("config 'shared-4' stays")
            assert cluster.allocatable(XPU) == CARDS * REPLICAS
            cluster.kubectl("label", "node", cluster.node_name, f"{CONFIG_LABEL}-")
            cluster.wait_allocatable(XPU, CARDS, timeout=60)
        assert w.bad == [], w.bad
        assert took < 60
        for verb, allowed in (("get", "yes"), ("list", "yes"), ("watch", "yes"), ("patch", "no"), ("update", "no"),
                              ("delete", "no")):
            r = cluster.kubectl("auth", "can-i", verb, "nodes", "--as", user, check=False)
            assert r.stdout.strip() == allowed, (verb, r.stdout, r.stderr)
        r = cluster.kubectl("auth", "can-i", "get", "secrets", "-n", NS, "--as", user, check=False)
        assert r.stdout.strip() == "no", r.stdout
        # only the config containers hold the token
        spec = node.ds()["spec"]["template"]["spec"]
        holders = [c["name"] for c in spec["initContainers"] + spec["containers"]
                   if any(m["name"] == "device-plugin-config-token" for m in c.get("volumeMounts", []))]
        assert sorted(holders) == [SIDECAR, f"{SIDECAR}-init"] and spec["automountServiceAccountToken"] is False
    finally:
        cluster.kubectl("label", "node", cluster.node_name, f"{CONFIG_LABEL}-", check=False)
        node.write_overlay("unused")


#: the values users bring from NVIDIA's and HAMi's charts (all but the args observable on the pods)
USERS_VALUES: Dict[str, Any] = {
    "global": {"imageRegistry": "docker.io", "imagePullSecrets": [{"name": "xpu-cdi-test-pull"}]},
    "imagePullSecrets": ["xpu-cdi-test-pull"],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
    "podAnnotations": {"example.com/team": "ai"}, "podLabels": {"example.com/pool": "npu"},
    "logLevel": "warning",
    "devicePlugin": {"logLevel": "debug", "extraArgs": ["--removal-grace", "7"],
                     "podLabels": {"example.com/pool": "plugin"},
                     "nodeSelector": {ACCEL_LABEL: "true", "kubernetes.io/os": "linux"},
                     "tolerations": [{"key": "example.com/npu", "operator": "Exists", "effect": "NoSchedule"}],
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}}},
    # OnDelete: the exporter's pod is not rolled by the upgrade
    "exporter": {"updateStrategy": {"type": "OnDelete"}, "priorityClassName": "system-cluster-critical",
                 "extraArgs": ["--interval", "5"]},
}


def replaced(node: HelmNode, old: Dict[str, Any], component: str) -> Dict[str, Any]:
    """The pod of *component* that replaced *old*, once it alone is left and all its containers are Ready."""
    def done() -> Any:
        ps = node.pods(component)
        if len(ps) != 1 or ps[0]["metadata"]["uid"] == old["metadata"]["uid"]:
            return None
        st = ps[0]["status"].get("containerStatuses", [])
        return ps[0] if st and all(c.get("ready") for c in st) else None

    return node.cluster.wait(done, 300, f"the {component} pod replaced and Ready", interval=0.5)


def test_upgrade_with_the_values_users_bring(node: HelmNode, pods: List[str]) -> None:
    """`helm upgrade` with the anchors' values (USERS_VALUES): the API server takes them, the plugin's
    pod rolls (no pod fails) and carries each (registry, pull secrets, labels, annotations, affinity,
    tolerations, selector); the exporter's, OnDelete, is not rolled until deleted, then comes back with
    its own priority class; cards still reach a pod.  The log level and extra args are in the values
    but not checked here: the test's post-renderer replaces the daemons' args with deploy/'s, moved
    to the session's paths (test_chart checks them, and that the CLI takes them)."""
    cluster = node.cluster
    (old_plugin,) = node.pods()
    (old_exporter,) = node.pods("metrics")
    # no --wait: helm's waits for every DaemonSet to be updated, which OnDelete's is not until its
    # pods are deleted (docs/helm.md says so)
    with tempfile.TemporaryDirectory() as d, Watch(cluster) as w:
        node.helm("upgrade", RELEASE, *node.chart_args(VERSION), "--set", "image.repository=library/xpu-cdi",
                  "--values", values_file(USERS_VALUES, Path(d)), "--namespace", NS)
        new = replaced(node, old_plugin, "cdi-spec")
    assert w.bad == [], w.bad
    meta, spec = new["metadata"], new["spec"]
    assert meta["labels"]["example.com/pool"] == "plugin" and meta["annotations"]["example.com/team"] == "ai"
    assert spec["imagePullSecrets"] == [{"name": "xpu-cdi-test-pull"}]
    assert {c["image"] for c in spec["containers"]} == {f"docker.io/library/xpu-cdi:{VERSION}"}
    assert spec["nodeSelector"] == {ACCEL_LABEL: "true", "kubernetes.io/os": "linux"}
    assert {"key": "example.com/npu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    # the DaemonSet controller, having matched the template's affinity, pins its pods to their node
    ds = node.ds()
    (term,) = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e["key"] for e in term["matchExpressions"]] == ["kubernetes.io/os", "xpu-cdi.io/kubernetes-allocation"]
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
    exporter_ds = node.ds(EXPORTER)
    assert exporter_ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    (kept,) = node.pods("metrics")
    assert kept["metadata"]["uid"] == old_exporter["metadata"]["uid"]  # OnDelete: not rolled
    cluster.kubectl("delete", "pod", kept["metadata"]["name"], "-n", NS, "--wait=true")
    exporter = replaced(node, kept, "metrics")
    assert exporter["spec"]["priorityClassName"] == "system-cluster-critical"
    cluster.wait_allocatable(XPU, CARDS, timeout=60)  # no sharing in these values: 8 again
    name = nodekit.unique("helm-users")
    pods.append(name)
    two_cards(cluster, name)


def test_uninstall_leaves_what_the_docs_list(node: HelmNode) -> None:
    """`helm uninstall`: no object of the release is left (nor its record); on the node, what
    docs/helm.md lists stays (as after `kubectl delete -k deploy/`), nothing else."""
    cluster = node.cluster
    node.helm("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "5m")
    cluster.wait(lambda: not node.pods() and not node.pods("metrics"), 120, "the release's pods gone")
    for kind, name in (("daemonset", DS), ("daemonset", EXPORTER), ("service", EXPORTER),
                       ("configmap", "xpu-cdi-node-config"), ("configmap", "xpu-cdi-device-plugin"),
                       ("runtimeclass", "xpu")):
        r = cluster.kubectl("get", kind, name, "-n", NS, check=False)
        assert r.returncode != 0 and "NotFound" in r.stderr, (kind, name, r.stdout)
    assert cluster.kubectl("get", "secrets", "-n", NS, "-l", f"owner=helm,name={RELEASE}",
                           "-o", "name").stdout.strip() == ""
    node.assert_left_only_what_stays()  # test_daemonset_node leaves the same things staying
    section = DOCS.read_text().split("## Uninstall: what stays", 1)[1].split("\n## ", 1)[0]
    assert [d for d in DOCUMENTED if d not in section] == []



MODEL = "huawei.com/Ascend310P"  # mind-cluster's name for the 310P (profiles/ascend.yaml dra.models)


@pytest.fixture
def ascend_310p(node: HelmNode, cluster: Cluster, tmp_path: Path) -> Iterator[HelmNode]:
    """After the first release's uninstall: an Ascend 310P host (4 NPUs, PCI 19e5:d500) on the node, the
    chart installed with devicePlugin.resourceNaming=model (no exporter: its tool is Kunlunxin's here)."""
    n = HelmNode(cluster, tmp_path / "helm", lambda at: fakehost.ascend(at, 4, pci_device="0xd500"))
    cluster.kubectl("label", "node", cluster.node_name, f"{ACCEL_LABEL}=true", "--overwrite")
    try:
        n.helm("install", RELEASE, *n.chart_args(VERSION), "--set", "devicePlugin.resourceNaming=model",
               "--set", "exporter.enabled=false", "--namespace", NS, "--wait", "--timeout", "5m")
        n.wait_rolled_out(VERSION)
        yield n
    finally:
        n.clean(NS)
        cluster.wait_allocatable(MODEL, 0, timeout=60)


def test_install_with_model_naming_gives_the_model_resource(ascend_310p: HelmNode, pods: List[str]) -> None:
    """resourceNaming: model: kubelet's allocatable is huawei.com/Ascend310P 4, nothing under the kind's
    huawei.com/npu, and a pod asking for two of them gets the two kubelet assigned."""
    cluster = ascend_310p.cluster
    cluster.wait_allocatable(MODEL, 4, timeout=60)
    assert int(cluster.node()["status"]["allocatable"].get(nodekit.NPU, "0")) == 0
    name = nodekit.unique("helm-310p")
    pods.append(name)
    nodekit.assert_npu_pod_sees_its_cards(cluster, name, MODEL, 2)
