"""`make bench`, the DRA driver's own figures (scripts/bench_k8s.py calls :func:`measure` on its
one-node cluster, with the driver it runs there).

``xpu-cdi dra-driver`` serves a fake 8-card P800 node to the cluster's real kubelet and API server
(tests/support/dranode.py: on the machine, as deploy/dra/rbac.yaml's service account, under its
admission policy), and is measured for:

* start -> slices published: from the process start to its status file saying kubelet took the
  registration and the API server has the node's slices (median of 3 starts; target <= 2 s);
* NodePrepareResources of a 2-card claim the scheduler allocated to a running pod, called on the
  driver's socket with kubelet's own stubs, the driver's read of the claim from the API server
  included: p99 over the calls, client side (target p99 <= 20 ms);
* resident memory after publishing and preparing (target <= 80 MiB).

The pod-start figure (pod created -> container running, through a claim vs through the device
plugin) is bench_k8s.py's.
"""

from __future__ import annotations

import statistics
import time
from typing import Dict, List, Tuple

from support import HANG, dranode
from support.k8s import nodekit
from support.k8s.cluster import Cluster

Rows = List[Tuple[str, str, str]]
TARGETS = {"prepare_p99_ms": 20.0, "rss_mib": 80.0, "published_s": 2.0}


def _p99(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(cluster: Cluster, driver: dranode.DraDriver, calls: int = 300, starts: int = 3) -> Dict[str, List[float]]:
    """The samples (seconds, MiB) of *driver*, serving on *cluster*; the driver is restarted *starts* times."""
    import grpc

    from support import kubeproto

    dra, dra_grpc = kubeproto.stubs("dra/v1/api.proto")
    out: Dict[str, List[float]] = {"prepare_s": [], "published_s": [], "rss_mib": []}
    for _ in range(starts):
        driver.restart()
        out["published_s"].append(driver.served_after)
    template = dranode.claim_template(cluster, {"count": 2})
    name = nodekit.unique("bench-dra")
    try:
        cluster.apply(dranode.claim_pod(name, template))
        cluster.wait_pod_phase(name, "Running")
        meta = dranode.pod_claim(cluster, name)["metadata"]
        channel = grpc.insecure_channel(f"unix:{driver.dir / f'dra-{driver.pod_uid}.sock'}")
        stub = dra_grpc.DRAPluginStub(channel)
        req = dra.NodePrepareResourcesRequest(claims=[dra.Claim(namespace="default", name=meta["name"],
                                                                uid=meta["uid"])])
        try:
            for _ in range(calls):
                t = time.perf_counter()
                r = stub.NodePrepareResources(req, timeout=HANG)
                out["prepare_s"].append(time.perf_counter() - t)
                assert not r.claims[meta["uid"]].error and len(r.claims[meta["uid"]].devices) == 2, r
        finally:
            channel.close()
        assert driver.proc is not None
        out["rss_mib"].append(_rss_mib(driver.proc.proc.pid))
    finally:
        nodekit.wait_gone(cluster, name)
        cluster.kubectl("delete", "resourceclaimtemplate", template, "--ignore-not-found")
    return out


def rows_of(s: Dict[str, List[float]]) -> Rows:
    p = [v * 1e3 for v in s["prepare_s"]]
    p99 = _p99(p)

    def met(value: float, key: str) -> str:
        return "met" if value <= TARGETS[key] else "**missed**"

    pub = statistics.median(s["published_s"])
    return [
        ("DRA driver: NodePrepareResources, 2 cards", f"{statistics.median(p):.2f} ms",
         f"p99 {p99:.2f} ms over {len(p)} calls on the real node, the claim read from the API server included; "
         f"target p99 <= 20 ms: {met(p99, 'prepare_p99_ms')}"),
        ("DRA driver: resident memory", f"{s['rss_mib'][0]:.0f} MiB",
         f"VmRSS after publishing 8 cards and preparing; target <= 80 MiB: {met(s['rss_mib'][0], 'rss_mib')}"),
        ("DRA driver: start -> slices published", f"{pub * 1e3:.0f} ms",
         f"process start to registered with kubelet and the slices written, median of {len(s['published_s'])} "
         f"starts (max {max(s['published_s']) * 1e3:.0f} ms); target <= 2 s: {met(pub, 'published_s')}"),
    ]
