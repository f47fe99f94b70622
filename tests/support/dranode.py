"""`xpu-cdi dra-driver` on the suite's one-node cluster: run on the machine against the real
kubelet (its plugin watcher and plugins directories) and the real API server, as the service
account deploy/dra/rbac.yaml makes, with a token bound to a stand-in pod on the node (what a
DaemonSet pod's token is: the admission policy reads the node's name from it).

The driver runs in the node's network namespace (the API server listens on its loopback) and
in the machine's mount namespace (the cards of the fake host, kubelet's directories at the
same paths).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from support import kubeletkit, matrix
from support.k8s import nodekit
from support.k8s.cluster import Cluster
from support.k8s.nodekit import Cards

REPO = Path(__file__).resolve().parent.parent.parent
DEPLOY = REPO / "deploy" / "dra"
DRIVER = "kunlunxin.com"
CLASS = "xpu.kunlunxin.com"
SA = "xpu-cdi-dra-driver"
NAMESPACE = "kube-system"


def manifests(name: str) -> List[Dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


class Identity:
    """deploy/dra/rbac.yaml and deviceclasses.yaml applied for real (or *manifests*, e.g.
    deploy/labels/rbac.yaml with its service account *sa*); a stand-in pod of the service account
    on the node, and a kubeconfig with a token bound to it; :meth:`close` removes them all."""

    def __init__(self, cluster: Cluster, work: Path, manifests: Sequence[Path] = (DEPLOY / "rbac.yaml",
                                                                                  DEPLOY / "deviceclasses.yaml"),
                 sa: str = SA) -> None:
        self.cluster = cluster
        self.manifests = tuple(manifests)
        self.pod = nodekit.unique(sa)
        self.kubeconfig = work / f"{sa}.kubeconfig"
        self.uid = ""
        for path in self.manifests:
            cluster.kubectl("apply", "--server-side", "-f", "-", input=path.read_text())
        obj = nodekit.pod(self.pod, ["sleep", "2147483647"])
        obj["metadata"]["namespace"] = NAMESPACE
        obj["spec"]["serviceAccountName"] = sa
        cluster.apply(obj)
        self.uid = cluster.wait_pod_phase(self.pod, "Running", namespace=NAMESPACE)["metadata"]["uid"]
        token = cluster.kubectl("create", "token", sa, "-n", NAMESPACE, "--bound-object-kind", "Pod",
                                "--bound-object-name", self.pod, "--bound-object-uid", self.uid,
                                "--duration", "4h").stdout.strip()
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "driver",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                   "certificate-authority": str(cluster.pki.ca.cert)}}],
            "users": [{"name": "driver", "user": {"token": token}}],
            "contexts": [{"name": "driver", "context": {"cluster": "c", "user": "driver"}}]}))

    def close(self) -> None:
        c = self.cluster
        c.delete("pod", self.pod, namespace=NAMESPACE)
        for path in reversed(self.manifests):
            c.kubectl("delete", "--ignore-not-found", "-f", "-", input=path.read_text())


class DraDriver:
    """`xpu-cdi dra-driver` serving *cards* to the cluster's kubelet, as :class:`Identity`."""

    def __init__(self, cluster: Cluster, cards: Cards, work: Path, identity: Identity, *extra: str,
                 pod_uid: str = "") -> None:
        """*pod_uid*: the uid its sockets and status file are named with (default: the stand-in pod's;
        another one, with another driver's *work*, is the second pod of a rolling update: the same
        run dir and boot)."""
        self.cluster, self.cards, self.identity = cluster, cards, identity
        self.work = work
        self.pod_uid = pod_uid or identity.uid
        self.run_dir = work / "run"  # the status file and the one-way-per-kind locks
        self.boot_id = work / "boot_id"
        if not self.boot_id.exists():
            self.boot_id.write_text(str(uuid.uuid4()) + "\n")
        self.extra = list(extra)
        self.expected = cards.count  # the devices wait_served waits for (partitions publish more)
        self.proc: Optional[kubeletkit.PluginProcess] = None
        self.log: Optional[Path] = None
        self.started = 0.0
        self.served_after = 0.0  # seconds from the last start to served (wait_served)
        cluster.on_stop(self.close)
        self.start()

    @property
    def dir(self) -> Path:
        """The driver's own directory below kubelet's plugins dir (its DRA socket, checkpoint.json)."""
        return self.cluster.plugins_dir / self.name

    @property
    def name(self) -> str:
        """The driver name: the CDI vendor of the cards' kind (``kunlunxin.com``, ``huawei.com``)."""
        return self.cards.kind.partition("/")[0]

    def args(self) -> List[str]:
        c = self.cluster
        return [*self.cards.host.cli_roots, "--profile", self.cards.profile, "--profiles-dir", "/nonexistent",
                "--kubeconfig", str(self.identity.kubeconfig), "--node-name", c.node_name,
                "--registry-dir", str(c.plugins_registry_dir), "--plugins-dir", str(c.plugins_dir),
                "--run-dir", str(self.run_dir), "--pod-uid", self.pod_uid, "--spec-dir", str(c.cdi_dir),
                "--node-config", str(self.work / "config.yaml"), "--health-interval", "0.5",
                "--boot-id-file", str(self.boot_id), *self.extra]

    @property
    def status_file(self) -> Path:
        return self.run_dir / f"dra-driver-{self.pod_uid}.json"

    def status(self) -> Dict[str, Any]:
        """What the running driver's status file says of the kind (``registered``, ``published``, ...)."""
        try:
            return json.loads(self.status_file.read_text())["kinds"].get(self.cards.kind) or {}
        except (OSError, ValueError, KeyError):
            return {}

    def start(self) -> None:
        """Start a new process (its own log); see :meth:`wait_served`."""
        self.status_file.unlink(missing_ok=True)  # a killed process's
        self.log = self.work / f"dra-{uuid.uuid4().hex[:6]}.log"
        self.started = time.monotonic()
        self.proc = kubeletkit.PluginProcess("pypi", self.args(), self.log, command="dra-driver",
                                             prefix=self.cluster.on_node([], mount=False))
        self.cluster.adopt(self.proc.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self) -> None:
        self.stop()
        self.start()
        self.wait_served()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log is not None and self.log.exists() else ""

    def slices(self) -> List[Dict[str, Any]]:
        return self.cluster.get("resourceslices", "--field-selector",
                                f"spec.nodeName={self.cluster.node_name},spec.driver={self.name}")["items"]

    def devices(self) -> Dict[str, Dict[str, Any]]:
        """The node's published devices of this driver, by name."""
        return {d["name"]: d for s in self.slices() for d in s["spec"].get("devices") or []}

    def wait_served(self, timeout: float = 60) -> float:
        """Until kubelet took the registration and every card is published untainted; the seconds from
        the process's start to its status file saying both (:attr:`served_after`)."""
        def alive() -> None:
            if self.proc is None or self.proc.proc.poll() is not None:
                raise AssertionError(f"the driver exited:\n{self.text()}")

        def said() -> bool:
            alive()
            st = self.status()
            return bool(st.get("registered") and st.get("published"))

        def published() -> bool:
            alive()
            devices = self.devices()
            return len(devices) == self.expected and not any(d.get("taints") for d in devices.values())

        self.cluster.wait(said, timeout, "the driver registered and published", interval=0.01)
        self.served_after = time.monotonic() - self.started
        self.cluster.wait(published, timeout, "every card published untainted", interval=0.05)
        return self.served_after

    def checkpoint(self) -> Dict[str, Any]:
        """The prepared claims of checkpoint.json, by claim uid."""
        return json.loads((self.dir / "checkpoint.json").read_text())["claims"]


# ------------------------------------------------------------------------------ claims and pods


def claim_template(cluster: Cluster, exactly: Dict[str, Any], constraints: Optional[List[Dict[str, Any]]] = None,
                   request: str = "xpus", device_class: str = CLASS) -> str:
    """A ResourceClaimTemplate of one request (``exactly``: count, selectors, allocationMode) of
    *device_class* (deploy/dra's), created; its name."""
    name = nodekit.unique("rct")
    devices: Dict[str, Any] = {"requests": [{"name": request, "exactly": {"deviceClassName": device_class,
                                                                          **exactly}}]}
    if constraints:
        devices["constraints"] = constraints
    cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                   "spec": {"spec": {"devices": devices}}})
    return name


def claim_pod(name: str, template: str) -> Dict[str, Any]:
    """A card_pod whose container uses a claim made from *template*."""
    return with_claim(nodekit.card_pod(name), template)


def with_claim(obj: Dict[str, Any], template: str) -> Dict[str, Any]:
    """Pod *obj* with its (first) container using a claim made from *template*."""
    obj["spec"]["resourceClaims"] = [{"name": "xpus", "resourceClaimTemplateName": template}]
    obj["spec"]["containers"][0]["resources"] = {"claims": [{"name": "xpus"}]}
    return obj


def pod_claim(cluster: Cluster, pod: str) -> Dict[str, Any]:
    """The ResourceClaim made for *pod* from its template."""
    statuses = cluster.pod(pod)["status"].get("resourceClaimStatuses") or []
    (name,) = [s["resourceClaimName"] for s in statuses]
    return cluster.get("resourceclaim", name)


def allocated(cluster: Cluster, pod: str, driver: str = DRIVER) -> List[int]:
    """The cards the scheduler allocated to *pod*'s claim (device names are the cards' indexes)."""
    results = pod_claim(cluster, pod)["status"]["allocation"]["devices"]["results"]
    assert all(r["driver"] == driver and r["pool"] == cluster.node_name for r in results), results
    return sorted(int(r["device"]) for r in results)


def unschedulable(cluster: Cluster, pod: str) -> Dict[str, Any]:
    """The pod's PodScheduled condition once the scheduler said Unschedulable, else {}."""
    conds = {c["type"]: c for c in cluster.pod(pod)["status"].get("conditions", [])}
    c = conds.get("PodScheduled", {})
    return c if c.get("reason") == "Unschedulable" else {}


def doctor(cluster: Cluster, driver: DraDriver, cards: Cards,
           plugin_status: Path) -> Dict[str, List[Dict[str, str]]]:
    """`xpu-cdi doctor --json` on the machine for the node: check name -> its results."""
    r = subprocess.run([matrix.XPU_CDI, "doctor", "--json", "--profile", "kunlunxin", "--profiles-dir", "/nonexistent",
                        *cards.host.cli_roots, "--spec-dir", str(cluster.cdi_dir), "--dra-run-dir", str(driver.run_dir),
                        "--plugin-dir", str(cluster.plugin_dir), "--plugin-status-file", str(plugin_status)],
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().startswith("["), r.stdout + r.stderr
    out: Dict[str, List[Dict[str, str]]] = {}
    for c in json.loads(r.stdout):
        out.setdefault(c["check"], []).append(c)
    return out
