"""The fleet-scale figures of `make bench --only scale` (scripts/bench.py calls :func:`run`; issue 45).

For each N of ``BENCH_SCALE_NODES`` (default ``100,1000``): the suite's control plane alone (API
server, etcd, controller manager, scheduler; no kubelet), N simulated nodes of five shapes made by our
own code, and every workload of tests/support/k8s/scale.py timed in one run, in a shuffled order each
round (``BENCH_SCALE_ROUNDS``: default 3 at N <= 100, else 1), then a churn phase
(``BENCH_SCALE_CHURN`` seconds, default 30, at ``BENCH_SCALE_RATE`` pods/s, default 10).  A batch is
at most ``BENCH_SCALE_BATCH`` pods (default 500) and fills at most half of what its shape's nodes hold.  Each N gets
a control plane of its own, so the memory figures are that N's.

Reported per N: the extended-resource baseline's pods/s (the device-plugin path) and each workload's
pods/s as a ratio to it, against the issue's targets (whole-card claims >= 0.8x; vNPU templates and
shares >= 0.5x) and against upstream's floor scaled to this machine (:data:`UPSTREAM_FLOOR`); the
scheduler's own SLI p50/p99 per workload; the scheduler's CPU per pod; the API server's and etcd's
memory and CPU; slice bytes per node by shape; the churn's create -> bound latency.  A plot of
pods/s against N per workload: ``<out>/scale.png``.

Without root or the builds the rows are left out, saying why.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from support import fakehost
from support.k8s import builds, scale

Rows = List[Tuple[str, str, str]]
#: kubernetes#140254: scheduler_perf's 500-node claim-template workload has a floor of 64 pods/s where
#: upstream's CI typically gets 81.  Scaled to this machine as if its baseline were that 81 (no
#: non-DRA rate is published beside it): floor = 64/81 of the baseline -- stricter than upstream's,
#: since a claim is never faster than the extended resource on the same machine.
UPSTREAM_FLOOR, UPSTREAM_TYPICAL = 64.0, 81.0


def measure(work: Path, nodes: int, rounds: int, churn: float, rate: float, seed: int,
            shapes: Dict[str, scale.Shape], batch: int) -> Dict[str, Any]:
    cluster = scale.control_plane()
    try:
        cluster.start()
        plan = scale.Plan(nodes=nodes, shapes=shapes, device_classes=scale.device_classes(),
                          kubeconfig=str(cluster.kubeconfig), pids=scale.daemon_pids(cluster), rounds=rounds,
                          churn_seconds=churn, churn_rate=rate, seed=seed, batch=batch)
        out = scale.run(cluster, plan, work)
        out["load"] = os.getloadavg()[0]
        return out
    finally:
        cluster.stop()


def by_workload(got: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """Workload -> its median pods/s, its ratio to the baseline's in the same round (the median of the
    rounds': a round's load hits both alike), SLI p50/p99 and scheduler CPU ms per pod (medians)."""
    out: Dict[str, Dict[str, float]] = {}
    base = {b["round"]: b["pods_per_s"] for b in got["batches"] if b["workload"] == scale.BASELINE}
    for w in scale.WORKLOADS:
        bs = [b for b in got["batches"] if b["workload"] == w.name]
        if not bs:
            continue
        out[w.name] = {"pods_per_s": statistics.median(b["pods_per_s"] for b in bs),
                       "ratio": statistics.median(b["pods_per_s"] / base[b["round"]] for b in bs),
                       "pods": bs[0]["pods"],
                       "sli_p50_s": statistics.median(b["sli_p50_s"] for b in bs),
                       "sli_p99_s": statistics.median(b["sli_p99_s"] for b in bs),
                       "sched_cpu_ms": statistics.median(b["cpu_s"]["kube-scheduler"] / b["pods"] * 1e3 for b in bs),
                       "api_cpu_ms": statistics.median(b["cpu_s"]["kube-apiserver"] / b["pods"] * 1e3 for b in bs),
                       "problems": sum(len(b["problems"]) for b in bs)}
    return out


def rows_of(results: Dict[str, Dict[str, Any]]) -> Rows:
    rows: Rows = []
    for n, got in results.items():
        ws = by_workload(got)
        base = ws[scale.BASELINE]["pods_per_s"]
        floor = UPSTREAM_FLOOR * base / UPSTREAM_TYPICAL
        rows.append((f"Scale N={n}: extended resource (device plugin), pods/s", f"**{base:.1f}**",
                     f"baseline; {ws[scale.BASELINE]['pods']} pods a batch, median of {got['rounds']} round(s); "
                     f"SLI p50 {ws[scale.BASELINE]['sli_p50_s'] * 1e3:.0f} ms / p99 "
                     f"{ws[scale.BASELINE]['sli_p99_s'] * 1e3:.0f} ms; scheduler CPU "
                     f"{ws[scale.BASELINE]['sched_cpu_ms']:.1f} ms/pod; upstream's floor scaled: {floor:.1f} pods/s"))
        for w in scale.WORKLOADS:
            if w.name == scale.BASELINE or w.name not in ws:
                continue
            v = ws[w.name]
            ratio = v["ratio"]
            cpu_ratio = v["sched_cpu_ms"] / ws[scale.BASELINE]["sched_cpu_ms"]
            verdict = "met" if ratio >= w.target else "**missed**"
            rows.append((f"Scale N={n}: {w.name} ({w.shape})", f"{ratio:.2f}x",
                         f"{v['pods_per_s']:.1f} pods/s, {v['pods']} pods, ratio in the same round (median); "
                         f"target >= {w.target}x: {verdict}; "
                         f"floor {floor:.1f}: {'met' if v['pods_per_s'] >= floor else '**missed**'}; SLI p50 "
                         f"{v['sli_p50_s'] * 1e3:.0f} ms / p99 {v['sli_p99_s'] * 1e3:.0f} ms; scheduler CPU "
                         f"{v['sched_cpu_ms']:.1f} ms/pod ({cpu_ratio:.1f}x)"
                         + (f"; {v['problems']} PROBLEMS" if v["problems"] else "")))
        c = got.get("churn") or {}
        if c:
            rows.append((f"Scale N={n}: churn, create -> bound", f"p50 {c['bound_p50_s'] * 1e3:.0f} ms",
                         f"p99 {c['bound_p99_s'] * 1e3:.0f} ms; {c['pods']} pods at {c['rate']:g}/s over "
                         f"{c['seconds']:.0f} s ({', '.join(c['mix'])} in turn, each deleted once bound); SLI p50 "
                         f"{c['sli_p50_s'] * 1e3:.0f} ms / p99 {c['sli_p99_s'] * 1e3:.0f} ms"
                         + (f"; {len(c['problems'])} PROBLEMS" if c.get("problems") else "")))
        mem, setup = got["memory_end"], got["memory_after_setup"]
        cpu = {k: sum(b["cpu_s"][k] for b in got["batches"]) for k in ("kube-apiserver", "etcd", "kube-scheduler")}
        pods = sum(b["pods"] for b in got["batches"])
        rows.append((f"Scale N={n}: API server / etcd memory", f"{mem['kube-apiserver']['VmHWM'] >> 20} / "
                     f"{mem['etcd']['VmHWM'] >> 20} MiB",
                     f"peak RSS (VmHWM) at the end; after set-up {setup['kube-apiserver']['VmRSS'] >> 20}"
                     f" / {setup['etcd']['VmRSS'] >> 20} MiB; {got['slices']} slices, "
                     f"{got['devices']} devices; set-up {got['setup_s']:.0f} s"))
        rows.append((f"Scale N={n}: API server / etcd / scheduler CPU per pod",
                     f"{cpu['kube-apiserver'] / pods * 1e3:.1f} / {cpu['etcd'] / pods * 1e3:.1f} / "
                     f"{cpu['kube-scheduler'] / pods * 1e3:.1f} ms",
                     f"over the {pods} pods of the batches (create, claims, bind, delete); load {got['load']:.1f}"))
        rows.append((f"Scale N={n}: slice bytes per node", ", ".join(
            f"{k} {v / 1024:.1f}" for k, v in got["slice_bytes_per_node"].items()) + " KiB",
            "the node's ResourceSlices as JSON, by shape"))
    return rows


def plot(results: Dict[str, Dict[str, Any]], path: Path) -> Optional[Path]:
    import bench_plot

    mpl = bench_plot._matplotlib()
    if mpl is None:
        return None
    mpl.use("Agg")  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2))
    ns = sorted(int(n) for n in results)
    for w in scale.WORKLOADS:
        ys = [by_workload(results[str(n)]).get(w.name, {}).get("pods_per_s", float("nan")) for n in ns]
        left.plot(ns, ys, "o-", label=w.name)
        rs = [by_workload(results[str(n)]).get(w.name, {}).get("ratio", float("nan")) for n in ns]
        right.plot(ns, rs, "o-", label=w.name)
    for ax, label in ((left, "pods scheduled per second"), (right, "ratio to the extended-resource baseline")):
        ax.set_xscale("log")
        ax.set_xlabel("simulated nodes")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    right.axhline(0.8, color="red", linestyle="--", linewidth=1, label="0.8x (whole cards)")
    right.axhline(0.5, color="orange", linestyle="--", linewidth=1, label="0.5x (vNPU, shares)")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.suptitle("xpu-cdi shapes on the real scheduler, no kubelets (issue 45)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(work: Path, seed: int = 0, out: Optional[Path] = None) -> Tuple[Rows, Dict[str, Any]]:
    """The rows and samples; ``([], {})``, saying why, where it cannot run."""
    if os.geteuid() != 0:
        print("bench: scale skipped: needs root", file=sys.stderr)
        return [], {}
    try:
        for c in ("kubernetes", "etcd"):
            builds.check_go(builds.COMPONENTS[c])
    except builds.Unavailable as err:
        print(f"bench: scale skipped: {err}", file=sys.stderr)
        return [], {}
    sizes = [int(n) for n in os.environ.get("BENCH_SCALE_NODES", "100,1000").split(",") if n.strip()]
    churn = float(os.environ.get("BENCH_SCALE_CHURN", "30"))
    rate = float(os.environ.get("BENCH_SCALE_RATE", "10"))
    batch = int(os.environ.get("BENCH_SCALE_BATCH", "500"))
    shapes_dir = work / "scale-shapes"
    results: Dict[str, Dict[str, Any]] = {}
    try:
        shapes = scale.build_shapes(shapes_dir)
        for n in sizes:
            rounds = int(os.environ.get("BENCH_SCALE_ROUNDS", "3" if n <= 100 else "1"))
            d = work / f"scale-{n}"
            d.mkdir(parents=True)
            t = time.monotonic()
            results[str(n)] = dict(measure(d, n, rounds, churn, rate, seed, shapes, batch), rounds=rounds,
                                   wall_s=time.monotonic() - t)
    finally:
        if shapes_dir.exists():
            for d in shapes_dir.iterdir():
                fakehost.remove_tree(d / "host")
    if out is not None and results:
        out.mkdir(parents=True, exist_ok=True)
        png = plot(results, out / "scale.png")
        if png:
            print(f"bench: wrote {png}", file=sys.stderr)
    return rows_of(results), results


if __name__ == "__main__":  # the scale rows alone: python scripts/bench_scale.py [OUT]
    import tempfile

    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "bench-out"
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-scale-", dir="/var/tmp") as tmp:
        rows, samples = run(Path(tmp), int(time.time()), dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "scale.json").write_text(json.dumps(samples, indent=1))
    width = max((len(r[0]) for r in rows), default=0)
    print("\n".join(f"  {name:<{width}}  {value:>14}  {note}" for name, value, note in rows))
