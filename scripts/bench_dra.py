"""`make bench`, the DRA driver's figures (called by scripts/bench.py after the rounds).

Runs ``xpu-cdi dra-driver`` as its own process on a fake 8-card P800 node
against a real API server and measures:

* start -> slices published: from the process start to the node's
  ResourceSlice being readable from the API server (target <= 2 s);
* NodePrepareResources for a claim of 2 cards, the driver's read of the
  claim from the API server included: p99 over the calls, client side, with
  kubelet's own stubs (target p99 <= 20 ms);
* resident memory after publishing and preparing (target <= 80 MiB).

The API server is the one the kubeconfig in ``XPU_CDI_BENCH_KUBECONFIG``
names (admin rights: the bench creates a Node, a claim and their status);
where none is given, the rows are skipped saying so.  Not measured here yet:
claim created -> pod Running against the device plugin's route, which needs
the suite's one-node cluster (scheduler, kubelet, containerd).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

Rows = List[Tuple[str, str, str]]
TARGETS = {"prepare_p99_ms": 20.0, "rss_mib": 80.0, "published_s": 2.0}
NODE = "xpu-cdi-bench-node"


def _p99(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(kubeconfig: str, work: Path, calls: int = 300) -> Dict[str, List[float]]:
    import grpc

    from support import fakehost, kubeproto
    from click.testing import CliRunner
    from xpu_cdi.cli import main
    from xpu_cdi.dra.kube import Kube, claim_path, slices_path

    dra, dra_grpc = kubeproto.stubs("dra/v1/api.proto")
    reg, reg_grpc = kubeproto.stubs("pluginregistration/v1/api.proto")
    kube = Kube(kubeconfig)
    host = fakehost.kunlunxin(work / "host", cards=8)
    spec_dir = work / "cdi"
    assert CliRunner().invoke(main, ["generate", *host.cli_roots, "--spec-dir", str(spec_dir)]).exit_code == 0
    sockets = Path(tempfile.mkdtemp(prefix="dra-bench-", dir="/tmp"))
    for d in ("reg", "plugins", "run"):
        (sockets / d).mkdir()
    try:
        kube.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    except Exception:  # noqa: BLE001 - left from an earlier run
        pass
    claim = kube.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"generateName": "bench-"},
        "spec": {"devices": {"requests": [{"name": "xpus", "exactly": {"deviceClassName": "xpu.kunlunxin.com",
                                                                        "count": 2}}]}}})
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "xpus", "driver": "kunlunxin.com", "pool": NODE, "device": d} for d in ("0", "1")]}}}
    kube.request("PUT", claim_path("default", name) + "/status", claim)
    out: Dict[str, List[float]] = {"prepare_s": [], "published_s": [], "rss_mib": []}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "xpu_cdi.cli", "dra-driver", *host.cli_roots,
                             "--kubeconfig", kubeconfig, "--node-name", NODE, "--spec-dir", str(spec_dir),
                             "--registry-dir", str(sockets / "reg"), "--plugins-dir", str(sockets / "plugins"),
                             "--run-dir", str(sockets / "run"), "--node-config", str(work / "none.yaml"),
                             "--pod-uid", "bench"], stderr=subprocess.DEVNULL)
    try:
        while time.monotonic() - t0 < 30:
            items = kube.get(slices_path(), {"fieldSelector": f"spec.nodeName={NODE}"}).get("items")
            if items and len(items[0]["spec"]["devices"]) == 8:
                out["published_s"].append(time.monotonic() - t0)
                break
            time.sleep(0.01)
        (sock,) = os.listdir(sockets / "reg")
        ch = grpc.insecure_channel(f"unix:{sockets / 'reg' / sock}")
        info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=5)
        stub = dra_grpc.DRAPluginStub(grpc.insecure_channel("unix:" + info.endpoint))
        req = dra.NodePrepareResourcesRequest(claims=[dra.Claim(namespace="default", name=name, uid=uid)])
        for _ in range(calls):
            t = time.perf_counter()
            r = stub.NodePrepareResources(req, timeout=10)
            out["prepare_s"].append(time.perf_counter() - t)
            assert not r.claims[uid].error and len(r.claims[uid].devices) == 2, r
        out["rss_mib"].append(_rss_mib(proc.pid))
    finally:
        proc.terminate()
        proc.wait(30)
        kube.request("DELETE", claim_path("default", name))
        kube.request("DELETE", f"/api/v1/nodes/{NODE}")
        shutil.rmtree(sockets, ignore_errors=True)
    return out


def rows_of(s: Dict[str, List[float]]) -> Rows:
    p = [v * 1e3 for v in s["prepare_s"]]
    p99 = _p99(p)

    def met(value: float, key: str) -> str:
        return "met" if value <= TARGETS[key] else "**missed**"

    pub = s["published_s"][0] if s["published_s"] else float("inf")
    return [
        ("DRA driver: NodePrepareResources, 2 cards", f"{statistics.median(p):.2f} ms",
         f"p99 {p99:.2f} ms over {len(p)} calls, the claim read from the API server included; "
         f"target p99 <= 20 ms: {met(p99, 'prepare_p99_ms')}"),
        ("DRA driver: resident memory", f"{s['rss_mib'][0]:.0f} MiB",
         f"VmRSS after publishing 8 cards and preparing; target <= 80 MiB: {met(s['rss_mib'][0], 'rss_mib')}"),
        ("DRA driver: start -> slices published", f"{pub * 1e3:.0f} ms",
         f"process start to the slice readable from the API server; target <= 2 s: {met(pub, 'published_s')}"),
    ]


def run(work: Path) -> Tuple[Rows, Dict[str, Any]]:
    """Rows and samples; ``([], {})`` with a note where no API server is given."""
    kubeconfig = os.environ.get("XPU_CDI_BENCH_KUBECONFIG", "")
    if not kubeconfig:
        print("bench: DRA driver skipped: no API server (set XPU_CDI_BENCH_KUBECONFIG to an admin kubeconfig)",
              file=sys.stderr)
        return [], {}
    samples = measure(kubeconfig, work / "dra")
    return rows_of(samples), samples


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        rows, samples = run(Path(d))
        for row in rows:
            print(" | ".join(row))
        print(json.dumps({k: [round(x, 6) for x in v[:5]] for k, v in samples.items()}))
