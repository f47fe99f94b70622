"""A fleet without kubelets (issue 45): the suite's real API server, etcd, scheduler and controller
manager, N Node objects and the ResourceSlices our DRA driver publishes, pods bound by the scheduler
and run by nobody -- what upstream's scheduler_perf measures, with our shapes (docs/performance.md,
"Scheduling at fleet scale").

**The shapes** (:func:`build_shapes`, on the machine): one fake host per kind of node, read by our
own code -- ``xpu-cdi generate`` for its spec, the DRA driver's :class:`~xpu_cdi.dra.daemon.Daemon`
(its inventory, :mod:`~xpu_cdi.dra.partitioned` with the stand-in ``npu-smi`` naming the chips,
:mod:`~xpu_cdi.dra.shares` with ``--share-capacity``) publishing to the in-memory API stand-in, the
labeller (:class:`~xpu_cdi.labels.daemon.Labeller`) for the node's labels, the same inventory's card
count for what the device plugin advertises.  Each simulated node of a shape gets those labels and
that allocatable, and slices made by :func:`xpu_cdi.dra.slices.build` from the driver's devices for
that node -- the call the driver's publisher makes (the test checks they are equal).

**The drive** (:func:`drive`, in the control plane's network namespace, where the API server is):
nodes, slices, the DeviceClasses of deploy/dra and a ResourceClaimTemplate per workload are made;
then batches of pods, one workload per batch, in a shuffled order each round.  For each batch the
scheduler is held (SIGSTOP) while the pods and their claims (the controller manager's) are created,
then let go: pods/s is the batch over the time from SIGCONT to its last binding (a watch), so what is
measured is the scheduler, not how fast this client creates pods (scheduler_perf creates its pods
in-process as fast as it can).  Per batch: the scheduler's SLI histogram (its /metrics, before and
after), the CPU seconds of the scheduler, API server and etcd, and the checks -- every pod bound, no
card given twice, no share or counter set over what it has.  The pods are then deleted (grace 0:
no kubelet confirms) and the claims waited gone.  A churn phase last: pods created at a steady rate
and each deleted once bound, create -> bound latency by the watch.

The scheduler and the controller manager run with the client QPS raised (as scheduler_perf's
in-process scheduler has it): at the default 50 a binding plus a claim's status write would cap the
scheduler at 25 pods/s whatever its algorithm does.  The controller manager runs without its
node-lifecycle controller: no kubelet renews the nodes' leases, and it would taint every node
unreachable mid-run.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[3]
SHAPE_LABEL = "scale.xpu-cdi.io/shape"
WORKLOAD_LABEL = "scale.xpu-cdi.io/workload"
BATCH_LABEL = "scale.xpu-cdi.io/batch"
ALLOCATION_LABEL = "xpu-cdi.io/kubernetes-allocation"  # an admin's: which nodes DRA serves (nodeconfig)
NAMESPACE = "default"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: no kubelet
SHARE_POLICY = "kunlunxin.com/xpu:default=32Gi,step=32Gi,memory=96Gi"  # docs/sharing.md's example
SLI = "scheduler_pod_scheduling_sli_duration_seconds"
#: kube-controller-manager and kube-scheduler flags of the fleet without kubelets (module docstring)
EXTRA_ARGS = {"kube-controller-manager": ["--controllers=*,-node-lifecycle-controller", "--kube-api-qps=1000",
                                          "--kube-api-burst=2000"],
              "kube-scheduler": ["--kube-api-qps=5000", "--kube-api-burst=5000"]}


@dataclass(frozen=True)
class ShapeSpec:
    """A kind of node: its fake host and how its kind is served."""

    name: str
    profile: str  # kunlunxin / ascend
    cards: int
    pci_device: str = ""  # an Ascend model's PCI device id
    chip: str = ""  # the chip name the stand-in npu-smi gives (partitions), "" for none
    dra: bool = True  # served by the DRA driver (slices), else by the device plugin (allocatable)
    share: str = ""  # --share-capacity
    weight: int = 1


SHAPES = (ShapeSpec("p800-dp", "kunlunxin", 8, dra=False, weight=2),
          ShapeSpec("p800", "kunlunxin", 8, weight=2),
          ShapeSpec("p800-share", "kunlunxin", 8, share=SHARE_POLICY),
          ShapeSpec("310p", "ascend", 4, pci_device="0xd500", chip="310P3"),
          ShapeSpec("910b", "ascend", 8, pci_device="0xd802", chip="910B3"))


@dataclass
class Shape:
    """What our code says of one shape's node: labels, allocatable, the DRA driver's devices."""

    spec: ShapeSpec
    kind: str
    driver: str
    labels: Dict[str, str]
    allocatable: Dict[str, str]
    devices: List[Any]  # xpu_cdi.dra.slices.DeviceInfo, as the driver's publisher holds them
    published: List[Dict[str, Any]] = field(default_factory=list)  # what it published for its own node

    def slices(self, node: str, uid: str) -> List[Dict[str, Any]]:
        """The node's ResourceSlices: the publisher's own call (generation 1, no card unhealthy)."""
        from xpu_cdi.dra import slices

        return slices.build(self.driver, node, self.devices, {}, 1, uid) if self.spec.dra else []


def counts(n: int) -> Dict[str, int]:
    """Nodes of each shape among *n*, by weight (every shape at least one)."""
    total = sum(s.weight for s in SHAPES)
    out = {s.name: max(1, n * s.weight // total) for s in SHAPES}
    for i in range(max(0, n - sum(out.values()))):  # the remainder, one each in turn
        out[SHAPES[i % len(SHAPES)].name] += 1
    return out


def build_shapes(work: Path) -> Dict[str, Shape]:
    """Every shape from a fake host of its own under *work* (root: the fake hosts' device nodes)."""
    return {s.name: build_shape(s, work / s.name) for s in SHAPES}


def build_shape(spec: ShapeSpec, base: Path) -> Shape:
    from support import fakehost, npusmi
    from support.fakeapi import FakeKube
    from xpu_cdi import log
    from xpu_cdi.dra import config, shares
    from xpu_cdi.dra.daemon import Daemon
    from xpu_cdi.generate import profile as _profile
    from xpu_cdi.labels.daemon import Labeller, Settings as LabelSettings

    root = base / "host"
    if spec.profile == "kunlunxin":
        host = fakehost.kunlunxin(root, spec.cards)
    else:
        host = fakehost.ascend(root, spec.cards, pci_device=spec.pci_device)
        tool = root / "usr/local/bin/npu-smi"  # the partition data's tool, in the driver root
        tool.unlink(missing_ok=True)
        if spec.chip:
            npusmi.init_state(root / "npu-smi.json", [{"card": i, "chip": 0, "name": spec.chip}
                                                      for i in range(spec.cards)], fakehost.NPU_MAJOR)
            npusmi.install(tool, root / "npu-smi.json", root)
    for n in sorted(set(host.numa.values())):
        (root / "sys/devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
    spec_dir = base / "cdi"
    subprocess.run([str(Path(sys.executable).parent / "xpu-cdi"), "generate", "--profile", spec.profile,
                    *host.cli_roots, "--spec-dir", str(spec_dir)], check=True, capture_output=True)
    (base / "boot_id").write_text("boot-1\n")
    sockets = Path(tempfile_dir())
    r = str(root)
    settings = config.Settings(
        node_name=spec.name, registry_dir=str(sockets / "reg"), plugins_dir=str(sockets / "plugins"),
        run_dir=str(sockets / "run"), pod_uid="scale", spec_dirs=(str(spec_dir),), dev_root=r, driver_root=r,
        sysfs_root=r, node_config=str(base / "config.yaml"), boot_id_file=str(base / "boot_id"),
        profiles=(spec.profile,), shares=shares.parse([spec.share]) if spec.share else {})
    lines: List[str] = []
    kube = FakeKube()
    d = Daemon(settings, log=log.into(lines), kube=kube)
    d.profiles = [_profile.load_all()[spec.profile]]
    d.ours = {p.kind: p.name for p in d.profiles}
    try:
        d.step()
        (kind,) = d.kinds
        driver = d.drivers[kind]
        devices = list(driver.publisher.devices)
        cards = len(d.kinds[kind].cards)
        published = [dict(s, metadata={k: v for k, v in s["metadata"].items() if k != "resourceVersion"})
                     for s in kube.slices.values()]
        name = driver.name
    finally:
        d.close()
        shutil.rmtree(sockets, ignore_errors=True)
    labeller = Labeller(LabelSettings(dev_root=r, driver_root=r, sysfs_root=r, profiles=(spec.profile,)),
                        log=log.into(lines))
    labels = labeller.wanted()
    if spec.dra:
        labels[ALLOCATION_LABEL] = "dra"
    if not spec.dra:  # the device plugin serves it: its count of cards, no slices
        return Shape(spec, kind, name, labels, {kind: str(cards)}, devices)
    return Shape(spec, kind, name, labels, {}, devices, published)


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="scale-", dir="/tmp")  # short: unix sockets' 107 bytes


# -- the workloads ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Pods of one kind of request on one shape's nodes; *per_node*: how many such pods a node holds."""

    name: str
    shape: str
    per_node: int
    limits: Tuple[Tuple[str, int], ...] = ()  # extended resources
    request: Optional[Dict[str, Any]] = None  # the claim template's one request (``exactly``)
    match: str = ""  # an attribute every device of the request must share (a constraint)
    target: float = 0.0  # the least ratio to the baseline's pods/s (issue 45)


XPU_CLASS, NPU_CLASS = "xpu.kunlunxin.com", "npu.huawei.com"
BASELINE = "extended-resource"


def cel(expression: str) -> List[Dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


WORKLOADS = (
    Workload(BASELINE, "p800-dp", 8, limits=(("kunlunxin.com/xpu", 1),)),
    Workload("claim-1", "p800", 8, request={"deviceClassName": XPU_CLASS, "count": 1}, target=0.8),
    Workload("claim-8", "p800", 1, request={"deviceClassName": XPU_CLASS, "count": 8}, target=0.8),
    Workload("cel-model", "p800", 8, request={"deviceClassName": XPU_CLASS, "count": 1, "selectors": cel(
        'device.attributes["kunlunxin.com"].model == "P800"')}, target=0.8),
    Workload("numa-pair", "p800", 4, request={"deviceClassName": XPU_CLASS, "count": 2},
             match="resource.kubernetes.io/numaNode", target=0.8),
    Workload("extended-mapped", "p800", 8, limits=(("kunlunxin.com/xpu", 1),), target=0.8),
    Workload("chip-910b", "910b", 8, request={"deviceClassName": NPU_CLASS, "count": 1, "selectors": cel(
        'device.attributes["huawei.com"].type == "chip"')}, target=0.8),
    Workload("vnpu-vir02", "310p", 16, request={"deviceClassName": NPU_CLASS, "count": 1, "selectors": cel(
        'device.attributes["huawei.com"].template == "vir02"')}, target=0.5),
    Workload("share-32gi", "p800-share", 24, request={"deviceClassName": XPU_CLASS, "count": 1,
                                                       "capacity": {"requests": {"memory": "32Gi"}}}, target=0.5),
)


def claim_template(w: Workload) -> Dict[str, Any]:
    devices: Dict[str, Any] = {"requests": [{"name": "dev", "exactly": w.request}]}
    if w.match:  # topology: the cards of one NUMA node
        devices["constraints"] = [{"requests": ["dev"], "matchAttribute": w.match}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": w.name, "namespace": NAMESPACE},
            "spec": {"metadata": {"labels": {WORKLOAD_LABEL: w.name}}, "spec": {"devices": devices}}}


def pod(w: Workload, name: str, batch: str) -> Dict[str, Any]:
    container: Dict[str, Any] = {"name": "c", "image": IMAGE}
    if w.limits:
        container["resources"] = {"limits": {k: str(v) for k, v in w.limits}}
    spec: Dict[str, Any] = {"nodeSelector": {SHAPE_LABEL: w.shape}, "containers": [container],
                            "terminationGracePeriodSeconds": 0}
    if w.request is not None:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": w.name}]
        container["resources"] = {"claims": [{"name": "dev"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": {
        WORKLOAD_LABEL: w.name, BATCH_LABEL: batch}}, "spec": spec}


# -- the plan: what the machine hands the drive -----------------------------------------------------------


@dataclass
class Plan:
    nodes: int
    shapes: Dict[str, Shape]
    device_classes: List[Dict[str, Any]]
    kubeconfig: str
    pids: Dict[str, int]  # kube-scheduler, kube-apiserver, etcd
    rounds: int = 1
    batch: int = 0  # pods per batch at most (0: nodes)
    churn_seconds: float = 20.0
    churn_rate: float = 10.0  # pods created per second during churn
    seed: int = 0
    workloads: Tuple[str, ...] = tuple(w.name for w in WORKLOADS)


def device_classes() -> List[Dict[str, Any]]:
    """deploy/dra's DeviceClasses of the two kinds the shapes have."""
    import yaml

    docs = yaml.safe_load_all((REPO / "deploy/dra/deviceclasses.yaml").read_text())
    return [d for d in docs if d and d["metadata"]["name"] in (XPU_CLASS, NPU_CLASS)]


# -- the drive (in the control plane's network namespace) ---------------------------------------------------


class Proc:
    """A daemon's CPU seconds and memory, from /proc."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.TICK

    def memory(self) -> Dict[str, int]:
        """VmRSS and VmHWM, bytes."""
        out = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
        return out


def histogram(text: str, name: str) -> Dict[float, float]:
    """Bucket upper bound -> cumulative count of *name*, summed over its other labels."""
    out: Dict[float, float] = {}
    prefix = name + "_bucket{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        labels, _, value = line[len(prefix):].rpartition("} ")
        le = [p.split("=", 1)[1].strip('"') for p in labels.split(",") if p.startswith("le=")][0]
        bound = float("inf") if le == "+Inf" else float(le)
        out[bound] = out.get(bound, 0.0) + float(value)
    return out


def quantile(before: Dict[float, float], after: Dict[float, float], q: float) -> float:
    """The *q* quantile of the observations between two scrapes (linear in the bucket, as Prometheus)."""
    bounds = sorted(after)
    cum = [after[b] - before.get(b, 0.0) for b in bounds]
    if not cum or cum[-1] <= 0:
        return float("nan")
    rank = q * cum[-1]
    prev_bound, prev = 0.0, 0.0
    for b, c in zip(bounds, cum):
        if c >= rank:
            if b == float("inf"):
                return prev_bound
            return prev_bound + (b - prev_bound) * ((rank - prev) / (c - prev) if c > prev else 0)
        prev_bound, prev = b, c
    return bounds[-1]


class Drive:
    def __init__(self, plan: Plan) -> None:
        from xpu_cdi.kube.client import Kube

        self.plan = plan
        self.kube = Kube(plan.kubeconfig, timeout=60)
        self.watcher = Kube(plan.kubeconfig, timeout=60)
        self.procs = {name: Proc(pid) for name, pid in plan.pids.items()}
        self.nodes: Dict[str, str] = {}  # node -> shape
        self.devices: Dict[Tuple[str, str, str], Dict[str, Any]] = {}  # (driver, pool, device) -> entry
        self.counter_sets: Dict[Tuple[str, str, str], Dict[str, int]] = {}  # (driver, pool, set) -> counters
        self.slice_bytes: Dict[str, int] = {}
        self.slice_count = 0
        self.pool = ThreadPoolExecutor(3)
        import yaml

        cfg = yaml.safe_load(Path(plan.kubeconfig).read_text())
        user = cfg["users"][0]["user"]
        self.tls = ssl.create_default_context()
        self.tls.check_hostname = False
        self.tls.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate
        self.tls.load_cert_chain(user["client-certificate"], user["client-key"])

    # -- set-up --------------------------------------------------------------------------------------

    def setup(self) -> Dict[str, float]:
        t0 = time.monotonic()
        for dc in self.plan.device_classes:
            self.kube.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", dc)
        for w in self.workloads():
            if w.request is not None:
                self.kube.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
                                  claim_template(w))
        names = [(f"scale-{shape}-{i:05d}", shape) for shape, n in counts(self.plan.nodes).items() for i in range(n)]
        list(self.pool.map(lambda a: self.add_node(*a), names))
        return {"setup_s": time.monotonic() - t0}

    def add_node(self, name: str, shape_name: str) -> None:
        shape = self.plan.shapes[shape_name]
        labels = dict(shape.labels, **{SHAPE_LABEL: shape_name, "kubernetes.io/hostname": name,
                                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"})
        node = self.kube.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                           "metadata": {"name": name, "labels": labels}})
        resources = dict({"cpu": "192", "memory": "1536Gi", "pods": "110"}, **shape.allocatable)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.kube.request("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            content_type="application/merge-patch+json")
        # the admission plugin's not-ready taint, which the (absent) node-lifecycle controller would lift
        self.kube.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}},
                          content_type="application/merge-patch+json")
        made = shape.slices(name, node["metadata"]["uid"])
        for s in made:
            self.kube.request("POST", "/apis/resource.k8s.io/v1/resourceslices", s)
            for dev in s["spec"].get("devices") or []:
                self.devices[(shape.driver, name, dev["name"])] = dev
            for cs in s["spec"].get("sharedCounters") or []:
                self.counter_sets[(shape.driver, name, cs["name"])] = {
                    k: quantity(v["value"]) for k, v in cs["counters"].items()}
        self.nodes[name] = shape_name
        self.slice_count += len(made)
        self.slice_bytes.setdefault(shape_name, len(json.dumps(made, separators=(",", ":"))))

    def workloads(self) -> List[Workload]:
        return [w for w in WORKLOADS if w.name in self.plan.workloads]

    # -- the scheduler ------------------------------------------------------------------------------

    def scheduler_metrics(self) -> str:
        with urllib.request.urlopen("https://127.0.0.1:10259/metrics", context=self.tls, timeout=30) as r:
            return r.read().decode()

    def hold(self, held: bool) -> None:
        os.kill(self.plan.pids["kube-scheduler"], signal.SIGSTOP if held else signal.SIGCONT)

    # -- one batch ------------------------------------------------------------------------------------

    def batch_size(self, w: Workload) -> int:
        room = counts(self.plan.nodes)[w.shape] * w.per_node // 2  # half full at the end: not a fill to the brim
        return max(1, min(self.plan.batch or self.plan.nodes, room))

    def pods_path(self) -> str:
        return f"/api/v1/namespaces/{NAMESPACE}/pods"

    def claims_path(self) -> str:
        return f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"

    def run_batch(self, w: Workload, label: str) -> Dict[str, Any]:
        n = self.batch_size(w)
        names = [f"{label}-{i:05d}" for i in range(n)]
        before = self.scheduler_metrics()
        cpu0 = {k: p.cpu() for k, p in self.procs.items()}
        rv = self.kube.get(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}"})["metadata"]["resourceVersion"]
        seen: Dict[str, float] = {}
        bound: Dict[str, float] = {}
        done = threading.Event()
        threading.Thread(target=self.follow, args=(label, rv, n, seen, bound, done), daemon=True).start()
        self.hold(True)
        try:
            t_create = time.monotonic()
            list(self.pool.map(lambda name: self.kube.request("POST", self.pods_path(), pod(w, name, label)), names))
            created_s = time.monotonic() - t_create
            if w.request is not None:  # the controller manager's claims, made while the scheduler waits
                self.wait(lambda: len(self.kube.get(self.claims_path(), {"labelSelector": f"{WORKLOAD_LABEL}={w.name}"})
                                      ["items"]) >= n, f"{n} claims of {label}")
            # the watch has every pod: it was running before the scheduler is let go, no binding missed
            self.wait(lambda: len(seen) >= n or done.is_set(), f"the watch seeing {label}'s pods")
        finally:
            t0 = time.monotonic()
            self.hold(False)
        done.wait(600)
        if len(bound) < n:
            raise RuntimeError(f"{label}: {len(bound)} of {n} pods seen bound")
        elapsed = max(bound.values()) - t0
        after = self.scheduler_metrics()
        cpu = {k: p.cpu() - cpu0[k] for k, p in self.procs.items()}
        problems = self.check(label, n)
        b, a = histogram(before, SLI), histogram(after, SLI)
        self.delete(label, w)
        return {"workload": w.name, "pods": n, "seconds": elapsed, "pods_per_s": n / elapsed,
                "create_s": created_s, "sli_p50_s": quantile(b, a, 0.5), "sli_p99_s": quantile(b, a, 0.99),
                "cpu_s": cpu, "problems": problems}

    def follow(self, label: str, rv: str, n: int, seen: Dict[str, float], bound: Dict[str, float],
               done: threading.Event) -> None:
        """When each pod of the batch is first seen, and first seen bound (*done* set when all are bound,
        or the watch failed)."""
        try:
            while len(bound) < n:
                for kind, obj in self.watcher.watch(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}",
                                                                        "resourceVersion": rv}, 300):
                    if kind == "ERROR":
                        print(f"scale: {label}: the watch ended: {obj}", file=sys.stderr)
                        return
                    rv = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    seen.setdefault(name, time.monotonic())
                    if obj["spec"].get("nodeName") and name not in bound:
                        bound[name] = time.monotonic()
                        if len(bound) >= n:
                            break
        finally:
            done.set()

    def check(self, label: str, n: int) -> List[str]:
        """What is wrong with the batch now: a pod unbound, a card given twice, a share or counter set over."""
        pods = self.kube.get(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}"})["items"]
        claims = self.kube.get(self.claims_path())["items"]
        return problems(pods, claims, n, self.nodes, self.plan.shapes, self.devices, self.counter_sets)

    def delete(self, label: str, w: Workload) -> None:
        """The batch's pods deleted one by one (grace 0: no kubelet confirms; a collection delete of
        hundreds outlasts the API server's request timeout under load), then its claims waited gone."""
        self.remove_pods(f"{BATCH_LABEL}={label}")
        self.wait(lambda: not self.kube.get(self.claims_path())["items"], f"{label}'s claims gone")

    def remove_pods(self, selector: str) -> None:
        from xpu_cdi.kube.client import ApiError

        def gone(name: str) -> None:
            try:
                self.kube.request("DELETE", f"{self.pods_path()}/{name}", {"gracePeriodSeconds": 0})
            except ApiError as err:
                if err.status != 404:
                    raise

        left = [p["metadata"]["name"] for p in self.kube.get(self.pods_path(), {"labelSelector": selector})["items"]]
        list(self.pool.map(gone, left))
        self.wait(lambda: not self.kube.get(self.pods_path(), {"labelSelector": selector})["items"],
                  f"pods {selector} gone")

    def wait(self, cond: Any, what: str, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.25)

    # -- churn ----------------------------------------------------------------------------------------

    def churn(self) -> Dict[str, Any]:
        """Pods of the claim workloads and the baseline in turn at a steady rate; each deleted once bound."""
        mix = [w for w in self.workloads() if w.name in (BASELINE, "claim-1", "vnpu-vir02", "share-32gi")]
        if not mix or self.plan.churn_seconds <= 0:
            return {}
        label = "churn"
        created: Dict[str, float] = {}
        latency: Dict[str, float] = {}
        listed = self.kube.get(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}"})
        stop = threading.Event()
        gone: List[str] = []

        def follow() -> None:
            rv = listed["metadata"]["resourceVersion"]
            while not stop.is_set():
                for kind, obj in self.watcher.watch(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}",
                                                                        "resourceVersion": rv}, 60):
                    if kind in ("BOOKMARK", "ERROR"):
                        if kind == "ERROR":
                            return
                        rv = obj["metadata"]["resourceVersion"]
                        continue
                    rv = obj["metadata"]["resourceVersion"]
                    name = obj["metadata"]["name"]
                    if obj["spec"].get("nodeName") and name not in latency and name in created:
                        latency[name] = time.monotonic() - created[name]
                        gone.append(name)
                    if stop.is_set():
                        return

        watch = threading.Thread(target=follow, daemon=True)
        watch.start()
        before = self.scheduler_metrics()
        cpu0 = {k: p.cpu() for k, p in self.procs.items()}
        t0 = time.monotonic()
        i = 0
        deleted = 0
        while time.monotonic() - t0 < self.plan.churn_seconds:
            due = t0 + i / self.plan.churn_rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            name = f"churn-{i:06d}"
            created[name] = time.monotonic()
            self.kube.request("POST", self.pods_path(), pod(mix[i % len(mix)], name, label))
            i += 1
            while deleted < len(gone):  # those bound so far go, as finished work does
                self.kube.request("DELETE", f"{self.pods_path()}/{gone[deleted]}", {"gracePeriodSeconds": 0})
                deleted += 1
        self.wait(lambda: len(latency) >= i, "the churn's pods bound", timeout=300)
        elapsed = time.monotonic() - t0
        stop.set()
        left = self.kube.get(self.pods_path(), {"labelSelector": f"{BATCH_LABEL}={label}"})["items"]
        found = problems(left, self.kube.get(self.claims_path())["items"], len(left), self.nodes, self.plan.shapes,
                         self.devices, self.counter_sets)
        after = self.scheduler_metrics()
        cpu = {k: p.cpu() - cpu0[k] for k, p in self.procs.items()}
        b, a = histogram(before, SLI), histogram(after, SLI)
        values = sorted(latency.values())
        self.remove_pods(f"{BATCH_LABEL}={label}")
        self.wait(lambda: not self.kube.get(self.claims_path())["items"], "the churn's claims gone")
        return {"pods": i, "seconds": elapsed, "rate": self.plan.churn_rate, "mix": [w.name for w in mix],
                "bound_p50_s": values[len(values) // 2], "bound_p99_s": values[min(len(values) - 1,
                                                                                   int(0.99 * len(values)))],
                "sli_p50_s": quantile(b, a, 0.5), "sli_p99_s": quantile(b, a, 0.99), "cpu_s": cpu,
                "problems": found}

    # -- the whole run ----------------------------------------------------------------------------------

    def run(self, save: Any = None) -> Dict[str, Any]:
        """The whole run; *save* is given what is measured so far after each batch (kept if a later one fails)."""
        out: Dict[str, Any] = {"nodes": self.plan.nodes, "counts": counts(self.plan.nodes)}
        mem0 = {k: p.memory() for k, p in self.procs.items()}
        out.update(self.setup())
        out["slices"], out["devices"] = self.slice_count, len(self.devices)
        out["slice_bytes_per_node"] = self.slice_bytes
        out["memory_after_setup"] = {k: p.memory() for k, p in self.procs.items()}
        out["memory_start"] = mem0
        rng = random.Random(self.plan.seed)
        batches: List[Dict[str, Any]] = []
        for r in range(self.plan.rounds):
            order = self.workloads()
            rng.shuffle(order)
            for w in order:
                batches.append(dict(self.run_batch(w, f"r{r}-{w.name}"), round=r))
                print(f"scale: N={self.plan.nodes} round {r} {w.name}: {batches[-1]['pods']} pods, "
                      f"{batches[-1]['pods_per_s']:.1f} pods/s", file=sys.stderr, flush=True)
                if save is not None:
                    save(dict(out, batches=batches, partial=True))
        out["batches"] = batches
        out["churn"] = self.churn()
        out["memory_end"] = {k: p.memory() for k, p in self.procs.items()}
        return out


def quantity(text: str) -> int:
    from xpu_cdi.dra.shares import parse_quantity

    return parse_quantity(text)


def problems(pods: Sequence[Dict[str, Any]], claims: Sequence[Dict[str, Any]], n: int, nodes: Dict[str, str],
             shapes: Dict[str, Shape], devices: Dict[Tuple[str, str, str], Dict[str, Any]],
             counter_sets: Dict[Tuple[str, str, str], Dict[str, int]]) -> List[str]:
    """Every pod bound (to a node of its shape, within its extended resources), no whole device given
    twice, no share over its device's capacity, no counter set over what it has."""
    out: List[str] = []
    unbound = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
    if len(pods) != n or unbound:
        out.append(f"{len(pods)} pods of {n}, unbound: {unbound[:5]}")
    ext: Dict[Tuple[str, str], int] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        if node and nodes.get(node) != p["spec"]["nodeSelector"][SHAPE_LABEL]:
            out.append(f"pod {p['metadata']['name']} on {node}, a {nodes.get(node)} node")
        for c in p["spec"]["containers"]:
            for k, v in ((c.get("resources") or {}).get("limits") or {}).items():
                ext[(node, k)] = ext.get((node, k), 0) + int(v)
    for (node, k), used in ext.items():
        have = int(shapes[nodes[node]].allocatable.get(k, "0")) if node in nodes else 0
        if have and used > have:
            out.append(f"{node}: {used} {k} bound, {have} allocatable")
    whole: Dict[Tuple[str, str, str], int] = {}
    shared: Dict[Tuple[str, str, str], int] = {}
    counters: Dict[Tuple[str, str, str], Dict[str, int]] = {}
    for c in claims:
        results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        for con in (c.get("spec") or {}).get("devices", {}).get("constraints") or []:
            attr = con.get("matchAttribute", "")
            typed = [(devices.get((r["driver"], r["pool"], r["device"])) or {}).get("attributes", {}).get(attr) or {}
                     for r in results]
            got = {str(next(iter(t.values()), None)) for t in typed}  # {"int": 0} -> "0"
            if attr and len(got) > 1:
                out.append(f"claim {c['metadata']['name']}: {attr} differs across its devices: {sorted(got)}")
        for r in results:
            key = (r["driver"], r["pool"], r["device"])
            dev = devices.get(key)
            if dev is None:
                out.append(f"claim {c['metadata']['name']} got {key}, which no slice has")
                continue
            if r.get("shareID"):
                shared[key] = shared.get(key, 0) + quantity((r.get("consumedCapacity") or {}).get("memory", "0"))
            else:
                whole[key] = whole.get(key, 0) + 1
            for use in dev.get("consumesCounters") or []:
                got = counters.setdefault((r["driver"], r["pool"], use["counterSet"]), {})
                for k, v in use["counters"].items():
                    got[k] = got.get(k, 0) + quantity(v["value"])
    out += [f"{key} given {times} times" for key, times in whole.items() if times > 1]
    for key, used in shared.items():
        if key in whole:
            out.append(f"{key} given whole and as shares")
        cap = quantity(devices[key]["capacity"]["memory"]["value"])
        if used > cap:
            out.append(f"{key}: shares of {used} bytes, the card has {cap}")
    for key, used in counters.items():
        have = counter_sets.get(key, {})
        over = {k: (v, have.get(k, 0)) for k, v in used.items() if v > have.get(k, 0)}
        if over:
            out.append(f"counter set {key} over: {over}")
    return out


# -- from the machine -----------------------------------------------------------------------------------


def control_plane() -> Any:
    """The suite's control plane, no node (not started): the API server, etcd, controller manager, scheduler."""
    from support.k8s import nodekit
    from support.k8s.cluster import Cluster

    return Cluster(kubelet=None, feature_gates=nodekit.FEATURE_GATES, extra_args=EXTRA_ARGS)


def daemon_pids(cluster: Any) -> Dict[str, int]:
    """The pids of the daemons the drive measures (each is exec'd by nsenter: its own process)."""
    out = {}
    for name in ("kube-scheduler", "kube-apiserver", "etcd"):
        pid = cluster.daemons[name].proc.pid
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if not name.startswith(comm):  # comm is 15 bytes at most
            raise RuntimeError(f"{name}'s process {pid} is {comm}")
        out[name] = pid
    return out


def run(cluster: Any, plan: Plan, work: Path, timeout: float = 3 * 3600) -> Dict[str, Any]:
    """:class:`Drive` in the cluster's network namespace (killed after *timeout* seconds); its results."""
    plan_file, out_file = work / "scale-plan.pickle", work / "scale-out.json"
    plan_file.write_bytes(pickle.dumps(plan))
    tests = REPO / "tests"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(tests), os.environ.get("PYTHONPATH")))))
    r = subprocess.run(cluster.on_node([sys.executable, "-m", "support.k8s.scale", str(plan_file), str(out_file)],
                                       mount=False), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=None, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"the scale drive failed ({r.returncode}): {r.stdout[-2000:]}")
    return json.loads(out_file.read_text())


def main(argv: Iterable[str]) -> int:
    plan_file, out_file = list(argv)
    plan: Plan = pickle.loads(Path(plan_file).read_bytes())
    def save(doc: Dict[str, Any]) -> None:
        Path(out_file).write_text(json.dumps(doc, indent=1))

    save(Drive(plan).run(save))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
