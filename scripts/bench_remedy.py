"""`make bench BENCH_ARGS="--only remedy"`: the DRA driver's remediation on the one-node cluster of
tests/k8s (issue 43; only when asked for: it starts its own cluster).

``xpu-cdi dra-driver --evict kunlunxin.com/xpu:grace=G,hold-down=1`` serves 8 fake P800s
(tests/support/dranode.py: as deploy/dra's service account, under its admission policies). Each
round runs a Job of one pod holding one card through a claim template; its card fails (the device
node unlinked, as tests/k8s/test_remedy_dra_node.py does it) and is timed:

* failure -> the pod evicted: the watch's receipt of the pod's first update with a
  ``deletionTimestamp`` (the device taint eviction controller deletes it once the taint is
  NoExecute); minus the grace, what the driver and Kubernetes add to it;
* failure -> the Job's pod running again: its replacement (another claim, another card: the failed
  one is tainted) seen Running on the watch (kubelet posts Running at its next relist).

Then the card is back and, after the hold-down, untainted for the next round. ``BENCH_REMEDY_ROUNDS``
(default 5), ``BENCH_REMEDY_GRACE`` (seconds, default 2).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from support import HANG, dranode, fakehost
from support.dpnode import short_dir
from support.k8s import builds, nodekit

Rows = List[Tuple[str, str, str]]


class PodWatch:
    """``kubectl get pods --watch``: per pod, the wall time (ns) it was first seen deleting, and Running."""

    def __init__(self, cluster: "nodekit.Cluster") -> None:
        self.deleting: Dict[str, int] = {}
        self.running: Dict[str, int] = {}
        self.job: Dict[str, str] = {}  # pod -> its Job
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
                obj = event.get("object", {})
                meta = obj.get("metadata", {})
                name = meta.get("name", "")
                with self.cond:
                    self.job.setdefault(name, (meta.get("labels") or {}).get("job-name", ""))
                    if meta.get("deletionTimestamp"):
                        self.deleting.setdefault(name, now)
                    if obj.get("status", {}).get("phase") == "Running" and not meta.get("deletionTimestamp"):
                        self.running.setdefault(name, now)
                    self.cond.notify_all()

    def wait(self, what: Any, timeout: float = HANG) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = what()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("the watch never saw what the bench waits for")
                self.cond.wait(left)

    def running_pod(self, job: str, besides: str = "") -> Optional[Tuple[str, int]]:
        return next(((p, t) for p, t in self.running.items() if self.job.get(p) == job and p != besides
                     and p not in self.deleting), None)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def job(name: str, template: str) -> Dict[str, Any]:
    """A Job of one pod holding one card, as a training job is run: a pod deleted for a disruption (the
    taint manager's DisruptionTarget condition) is replaced at once, not counted against the backoff."""
    pod = dranode.with_claim(nodekit.pod("x", ["sh", "-c", 'trap "exit 143" TERM; sleep 2147483647 & wait']),
                             template)
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 3, "podFailurePolicy": policy,
                     "template": {"metadata": {"labels": {"bench": "remedy"}}, "spec": spec}}}


def measure(work: Path, rounds: int, grace: float) -> Dict[str, List[float]]:
    cluster = nodekit.xpu_cluster().start()
    cards: Optional[nodekit.Cards] = None
    identity: Optional[dranode.Identity] = None
    driver: Optional[dranode.DraDriver] = None
    watch: Optional[PodWatch] = None
    dra_dir = short_dir()
    out: Dict[str, List[float]] = {"evicted_s": [], "running_again_s": []}
    try:
        cards = nodekit.Cards(cluster, work / "remedy-cards")
        (work / "remedy-id").mkdir()
        identity = dranode.Identity(cluster, work / "remedy-id")
        driver = dranode.DraDriver(cluster, cards, dra_dir, identity, "--evict",
                                   f"{nodekit.XPU}:grace={grace:g},hold-down=1")
        driver.wait_served()
        template = dranode.claim_template(cluster, {})
        watch = PodWatch(cluster)
        for _ in range(rounds):
            name = nodekit.unique("remedy")
            cluster.apply(job(name, template))
            first, _t = watch.wait(lambda: watch.running_pod(name))
            (card,) = dranode.allocated(cluster, first)
            path = cards.host.path(f"/dev/xpu{card}")
            t0 = time.time_ns()
            path.unlink()
            try:
                evicted = watch.wait(lambda: watch.deleting.get(first))
                _again, running = watch.wait(lambda: watch.running_pod(name, besides=first))
            except RuntimeError:
                print(cluster.kubectl("get", "pods,jobs,resourceclaims", "-o", "wide").stdout, file=sys.stderr)
                print(cluster.kubectl("get", "events", "--sort-by=.lastTimestamp").stdout[-4000:], file=sys.stderr)
                raise
            finally:
                fakehost.mknod(path, fakehost.XPU_MAJOR, card)
            out["evicted_s"].append((evicted - t0) / 1e9)
            out["running_again_s"].append((running - t0) / 1e9)
            cluster.kubectl("delete", "job", name, "--cascade=foreground", "--wait=true", "--timeout=120s")
            cluster.wait(lambda: not any(d.get("taints") for d in driver.devices().values()), HANG,
                         "every card untainted after the hold-down", interval=0.1)
        cluster.kubectl("delete", "resourceclaimtemplate", template, "--ignore-not-found")
        return out
    finally:
        if watch is not None:
            watch.close()
        if driver is not None:
            driver.close()
        if identity is not None:
            identity.close()
        shutil.rmtree(dra_dir, ignore_errors=True)
        if cards is not None:
            cards.close()
        cluster.stop()


def run(work: Path) -> Tuple[Rows, Dict[str, Any]]:
    """The rows and samples (seconds); ``([], {})``, saying why, where they cannot run."""
    if os.geteuid() != 0:
        print("bench: remedy skipped: needs root", file=sys.stderr)
        return [], {}
    try:
        for c in ("kubernetes", "containerd", "etcd"):
            builds.check_go(builds.COMPONENTS[c])
    except builds.Unavailable as err:
        print(f"bench: remedy skipped: {err}", file=sys.stderr)
        return [], {}
    rounds = int(os.environ.get("BENCH_REMEDY_ROUNDS", "5"))
    grace = float(os.environ.get("BENCH_REMEDY_GRACE", "2"))
    s = measure(work, rounds, grace)
    ev, again = s["evicted_s"], s["running_again_s"]
    version = builds.COMPONENTS["kubernetes"].version()
    rows: Rows = [
        ("DRA remediation: card failed -> pod evicted", f"{statistics.median(ev):.2f} s",
         f"grace {grace:g} s included (median {statistics.median(ev) - grace:.2f} s beyond it, max "
         f"{max(ev) - grace:.2f} s) over {len(ev)} rounds; the driver's NoExecute taint, the device taint eviction "
         f"controller's delete, seen on a watch (Kubernetes {version})"),
        ("DRA remediation: card failed -> the Job's pod running again", f"{statistics.median(again):.2f} s",
         f"max {max(again):.2f} s: the replacement pod on another card, Running as kubelet posts it"),
    ]
    return rows, dict(s, grace_s=[grace])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-remedy-", dir="/var/tmp") as tmp:
        for row in run(Path(tmp))[0]:
            print(" | ".join(row))
