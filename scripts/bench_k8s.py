"""The Kubernetes figures of `make bench` (scripts/bench.py calls :func:`run`).

On the one-node cluster of tests/k8s (kubelet, scheduler, API server and containerd 2.x built
from their pinned modules; `xpu-cdi device-plugin` and `xpu-cdi dra-driver` both serving the
same 8 fake cards, each with its own run dir so neither refuses the kind: the pods run one at a
time, so no card is ever handed out twice), pods of the same busybox image and command are
created one at a time, interleaved in a shuffled order each round: one asking for all 8 cards
through the device plugin (its Allocate, kubelet's CDI names, containerd's CDI injection of 8
cards with the spec's update-ldcache hook), one through a DRA claim of 8 cards from a
ResourceClaimTemplate (the claim made by the controller, allocated by the scheduler, prepared
by the driver with the same static CDI names), and one asking for none.  Each is timed from its
creation (the API server's ADDED event on a watch) to its container running (containerd's CRI
``started_at``, nanoseconds): kubelet posts the Running phase only on its next PLEG relist, a
second later, for both alike.  The difference of the medians is what our part of the chain
adds; target <= 50 ms; the DRA route minus the device plugin's, target <= 100 ms.  Where it
goes is split with the CRI's own timestamps: pod created ->
sandbox created (scheduling, admission with the plugin's Allocate, volumes, the pause
container), sandbox -> container created (kubelet's container config with the CDI names,
containerd's CDI refresh and injection), created -> started (runc: the device nodes, their
cgroup rules, the driver mounts, the spec's update-ldcache hook).  The driver's own figures
(NodePrepareResources p99, resident memory, start -> slices published) are bench_dra.py's, on
this cluster after the pods.

Without Go (or not root) the rows are left out, saying why.  ``BENCH_K8S_PODS`` sets the pods
per variant (default 24).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import bench_dra
from support import HANG, dranode
from support.dpnode import short_dir
from support.k8s import builds
from support.k8s import nodekit

TARGET_MS = 50.0
TARGET_DRA_MS = 100.0
Rows = List[Tuple[str, str, str]]
DP, DRA, NONE = "8 cards", "8 cards, DRA claim", "no cards"
VARIANTS = (DP, DRA, NONE)


class Watch:
    """``kubectl get pods --watch`` on the cluster: the wall time each pod was first seen."""

    def __init__(self, cluster: "nodekit.Cluster") -> None:
        self.seen: Dict[str, int] = {}
        self.cond = threading.Condition()
        argv = cluster.on_node([str(cluster.kubectl_bin), "--kubeconfig", str(cluster.kubeconfig),
                                f"--cache-dir={cluster.base / 'kubectl-cache'}", "get", "pods", "--watch",
                                "--output-watch-events", "-o", "json"], mount=False)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        decoder, buf = json.JSONDecoder(), ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.time_ns()
            buf += line
            while buf.strip():
                try:
                    event, end = decoder.raw_decode(buf.lstrip())
                except ValueError:
                    break
                buf = buf.lstrip()[end:]
                name = event.get("object", {}).get("metadata", {}).get("name", "")
                with self.cond:
                    if event.get("type") == "ADDED" and name not in self.seen:
                        self.seen[name] = now
                        self.cond.notify_all()

    def added(self, name: str, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        with self.cond:
            while name not in self.seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"the watch never saw pod {name}")
                self.cond.wait(left)
            return self.seen[name]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class CriStatus:
    """containerd's CRI (the socket kubelet uses): when a pod's container started, in nanoseconds."""

    def __init__(self, cluster: "nodekit.Cluster") -> None:
        import grpc

        from support import kubeproto

        self.pb2, pb2_grpc = kubeproto.stubs("cri/runtime/v1/api.proto")
        self.channel = grpc.insecure_channel(f"unix://{cluster.containerd_socket}")
        self.runtime = pb2_grpc.RuntimeServiceStub(self.channel)

    def started_at(self, pod: str) -> Optional[int]:
        stamps = self.stamps(pod)
        return stamps[2] if stamps else None

    def stamps(self, pod: str) -> Optional[Tuple[int, int, int]]:
        """(sandbox created, container created, container started) of *pod*, ns; None until started."""
        pb = self.pb2
        label = {"io.kubernetes.pod.name": pod}
        flt = pb.ContainerFilter(label_selector=label)
        for c in self.runtime.ListContainers(pb.ListContainersRequest(filter=flt), timeout=HANG).containers:
            status = self.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=c.id), timeout=HANG).status
            if status.started_at:
                sandboxes = self.runtime.ListPodSandbox(pb.ListPodSandboxRequest(
                    filter=pb.PodSandboxFilter(id=c.pod_sandbox_id)), timeout=HANG).items
                return int(sandboxes[0].created_at), int(status.created_at), int(status.started_at)
        return None

    def close(self) -> None:
        self.channel.close()


#: The spans of one pod start, from its timestamps (pod added, sandbox created, container created, started).
SPANS = ("total", "to sandbox", "sandbox to container created", "created to started")


def one_pod(cluster: "nodekit.Cluster", watch: Watch, cri: CriStatus, variant: str, template: str) -> Dict[str, float]:
    """Seconds of each of SPANS for one pod of *variant* (*template*: the DRA claim's); the pod is gone afterwards."""
    name = nodekit.unique("bench")
    command = ["sh", "-c", 'trap "exit 0" TERM; sleep 2147483647 & wait']
    obj = nodekit.pod(name, command, {nodekit.XPU: 8} if variant == DP else None)
    cluster.apply(dranode.with_claim(obj, template) if variant == DRA else obj)
    try:
        added = watch.added(name)
        sandbox, created, started = cluster.wait(lambda: cri.stamps(name), 120, f"pod {name}'s container running",
                                                 interval=0.05)
        return dict(zip(SPANS, ((started - added) / 1e9, (sandbox - added) / 1e9, (created - sandbox) / 1e9,
                                (started - created) / 1e9)))
    finally:
        nodekit.wait_gone(cluster, name)


def p95(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def measure(work: Path, pods: int, seed: int) -> Tuple[Dict[str, Dict[str, List[float]]], Dict[str, List[float]]]:
    """The pods' spans by variant, and bench_dra's samples of the driver."""
    cluster = nodekit.xpu_cluster().start()
    cards: Optional[nodekit.Cards] = None
    dp: Optional[nodekit.DevicePlugin] = None
    identity: Optional[dranode.Identity] = None
    dra: Optional[dranode.DraDriver] = None
    dra_dir = short_dir()
    watch: Optional[Watch] = None
    cri: Optional[CriStatus] = None
    try:
        cards = nodekit.Cards(cluster, work / "k8s-cards")
        dp = nodekit.DevicePlugin(cluster, cards, work)
        dp.wait_served()
        (work / "dra-id").mkdir()
        identity = dranode.Identity(cluster, work / "dra-id")
        dra = dranode.DraDriver(cluster, cards, dra_dir, identity)
        dra.wait_served()
        template = dranode.claim_template(cluster, {"count": 8})
        watch, cri = Watch(cluster), CriStatus(cluster)
        for v in VARIANTS:  # warm-up: the image's snapshot, the spec in containerd's CDI cache
            one_pod(cluster, watch, cri, v, template)
        rng = random.Random(seed)
        out: Dict[str, Dict[str, List[float]]] = {v: {s: [] for s in SPANS} for v in VARIANTS}
        for _ in range(pods):
            order = list(VARIANTS)
            rng.shuffle(order)
            for v in order:
                for span, value in one_pod(cluster, watch, cri, v, template).items():
                    out[v][span].append(value)
        return out, bench_dra.measure(cluster, dra)
    finally:
        if watch is not None:
            watch.close()
        if cri is not None:
            cri.close()
        if dra is not None:
            dra.close()
        if identity is not None:
            identity.close()
        shutil.rmtree(dra_dir, ignore_errors=True)
        if dp is not None:
            dp.stop()
        if cards is not None:
            cards.close()
        cluster.stop()


def run(work: Path, seed: int = 0) -> Tuple[Rows, Dict[str, Any]]:
    """The rows and samples (seconds) of the Kubernetes figures and the DRA driver's; ``([], {})``, saying
    why, where they cannot run."""
    if os.geteuid() != 0:
        print("bench: Kubernetes pod start skipped: needs root", file=sys.stderr)
        return [], {}
    try:
        for c in ("kubernetes", "containerd", "etcd"):
            builds.check_go(builds.COMPONENTS[c])
    except builds.Unavailable as err:
        print(f"bench: Kubernetes pod start skipped: {err}", file=sys.stderr)
        return [], {}
    pods = int(os.environ.get("BENCH_K8S_PODS", "24"))
    samples, dra_samples = measure(work, pods, seed)

    def med(variant: str, span: str) -> float:
        return statistics.median(samples[variant][span]) * 1e3

    added = med(DP, "total") - med(NONE, "total")
    dra_added = med(DRA, "total") - med(DP, "total")
    versions = (f"kubelet {builds.COMPONENTS['kubernetes'].version()}, "
                f"containerd {builds.COMPONENTS['containerd'].version()}")
    verdict = "met" if added <= TARGET_MS else "missed"
    rows: Rows = [
        (f"Kubernetes: pod created -> container running, {name}", f"{med(name, 'total'):.0f} ms",
         f"p95 {p95(v['total']) * 1e3:.0f} ms over {len(v['total'])} pods, interleaved ({versions})")
        for name, v in samples.items()]
    rows.append(("**Kubernetes: added by 8 cards** (Allocate + CDI injection)", f"**{added:.0f} ms**",
                 f"median with 8 cards minus median with none; target <= {TARGET_MS:.0f} ms: **{verdict}**"))
    rows.append(("Kubernetes: added by 8 cards, per span", " / ".join(
        f"{med(DP, s) - med(NONE, s):+.0f}" for s in SPANS[1:]) + " ms",
        "differences of the medians: " + ", ".join(SPANS[1:]) + " (CRI timestamps)"))
    dra_verdict = "met" if dra_added <= TARGET_DRA_MS else "missed"
    rows.append(("**Kubernetes: DRA claim vs device plugin, 8 cards**", f"**{dra_added:+.0f} ms**",
                 f"median through a claim (template) minus median through the device plugin, same node; "
                 f"target <= {TARGET_DRA_MS:.0f} ms: **{dra_verdict}**"))
    rows.append(("Kubernetes: DRA claim vs device plugin, per span", " / ".join(
        f"{med(DRA, s) - med(DP, s):+.0f}" for s in SPANS[1:]) + " ms",
        "differences of the medians: " + ", ".join(SPANS[1:]) + " (CRI timestamps)"))
    return rows + bench_dra.rows_of(dra_samples), dict(samples, dra=dra_samples)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-k8s-", dir="/var/tmp") as tmp:
        for row in run(Path(tmp), int(time.time()))[0]:
            print(" | ".join(row))
