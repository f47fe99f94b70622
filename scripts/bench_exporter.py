"""The exporter's figures for `make bench` (scripts/bench.py calls :func:`run`).

``xpu-cdi exporter`` runs as its own process on the tests' fake node (8
Kunlunxin cards and 8 Ascend NPUs, fake xpu-smi and npu-smi printing the
documented outputs, tests/support/exporternode.py), on each Python stack that
is installed (PyPI's libraries in the venv, Debian's python3-prometheus-client,
python3-grpcio and python3-protobuf), at the default interval (10 s):

* scrape latency, client side: a new connection per GET of /metrics (as a
  Prometheus without keep-alive), readings cached, median and p99;
* resident memory (VmRSS) once it has refreshed and served;
* CPU of the exporter process itself (utime + stime) over a window at the
  default interval, scraped every 15 s as Prometheus would; the fake tools'
  CPU (its waited-for children) is reported beside it.

BENCH_EXPORTER_WINDOW sets the CPU window in seconds (default 60).
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent

TARGETS = {"scrape_p99_ms": 10.0, "rss_mib": 50.0, "cpu_percent": 1.0}
Rows = List[Tuple[str, str, str]]
SYSTEM_PYTHON = "/usr/bin/python3"


def _p99(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> Tuple[float, float]:
    """(own utime + stime, waited-for children's) of *pid*, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def _get(port: int) -> bytes:
    from support import HANG  # a bound on a hang: a scrape is timed, not cut

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read()
    finally:
        conn.close()


def _stack(stack: str) -> "Tuple[str, Dict[str, str]] | None":
    env = dict(os.environ)
    if stack == "pypi":
        return sys.executable, env
    env["PYTHONPATH"] = str(REPO / "src")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import grpc, google.protobuf, click, yaml"],
                           capture_output=True, env=env)
    return (SYSTEM_PYTHON, env) if probe.returncode == 0 else None


def measure(stack: str, python: str, env: Dict[str, str], work: Path, scrapes: int = 500,
            window: float = 60.0) -> Dict[str, List[float]]:
    from support.exporternode import ExporterProcess, make_node

    root = work / f"exp-host-{stack}"
    root.mkdir()
    tmp = work / f"exp-{stack}"
    tmp.mkdir()
    node = make_node(root, tmp)
    kubelet, sock_dir = _pod_resources()
    proc = ExporterProcess(node.args("--pod-resources-socket", str(sock_dir / "kubelet.sock")), tmp / "exporter.log",
                           python=python, env=env)
    out: Dict[str, List[float]] = {"scrape_s": [], "rss_mib": [], "cpu_percent": [], "tool_cpu_percent": []}
    try:
        body = _get(proc.port)
        assert b'xpu_cdi_card_temperature_celsius{card="7"' in body, "the first scrape has no readings"
        for i in range(scrapes + 20):
            t = time.perf_counter()
            _get(proc.port)
            if i >= 20:
                out["scrape_s"].append(time.perf_counter() - t)
        time.sleep(1.0)
        out["rss_mib"].append(_rss_mib(proc.proc.pid))
        own0, kids0 = _cpu_s(proc.proc.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < window:
            _get(proc.port)
            time.sleep(min(15.0, max(0.0, window - (time.monotonic() - t0))))
        elapsed = time.monotonic() - t0
        own1, kids1 = _cpu_s(proc.proc.pid)
        out["cpu_percent"].append(100 * (own1 - own0) / elapsed)
        out["tool_cpu_percent"].append(100 * (kids1 - kids0) / elapsed)
        out["rss_mib"].append(_rss_mib(proc.proc.pid))
        assert b'xpu_cdi_exporter_source_up{source="pod-resources"} 1.0' in _get(proc.port) or kubelet is None
    finally:
        proc.stop()
        if kubelet is not None:
            kubelet.stop()
        import shutil

        from support import fakehost
        fakehost.remove_tree(root)
        shutil.rmtree(sock_dir, ignore_errors=True)
    return out


def _pod_resources() -> "Tuple[object, Path]":
    """The tests' PodResources stand-in with two pods (so that gRPC is loaded and asked every interval,
    as on a node), or, where its upstream proto is not at hand, a bare socket (gRPC loaded, calls refused)."""
    import socket

    import pytest
    from support.exporternode import short_dir

    sock_dir = short_dir()
    try:
        from support.podresourceskit import Container, FakePodResources, Pod

        kubelet = FakePodResources(sock_dir / "kubelet.sock")
    except pytest.skip.Exception as why:
        print(f"bench: exporter measured against a bare socket: {why}", file=sys.stderr)
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(sock_dir / "kubelet.sock"))
        return None, sock_dir
    kubelet.set(pods=[Pod("ml", "train", [Container("w", devices=[("kunlunxin.com/xpu", ["0", "1", "2", "3"])])]),
                      Pod("ml", "infer", [Container("s", devices=[("huawei.com/npu", ["0", "1"])])])],
                allocatable=[("kunlunxin.com/xpu", [str(i) for i in range(8)]),
                             ("huawei.com/npu", [str(i) for i in range(8)])])
    return kubelet, sock_dir


def rows_of(stack: str, s: Dict[str, List[float]], window: float) -> Rows:
    a = [v * 1e3 for v in s["scrape_s"]]
    p99, med = _p99(a), statistics.median(a)
    rss = max(s["rss_mib"])
    cpu, tools = s["cpu_percent"][0], s["tool_cpu_percent"][0]

    def met(value: float, key: str) -> str:
        return "met" if value <= TARGETS[key] else "**missed**"

    return [
        (f"exporter ({stack}): scrape, 8 cards x 2 kinds", f"{med:.2f} ms",
         f"p99 {p99:.2f} ms over {len(a)} GETs of /metrics, a new connection each, readings cached; "
         f"target p99 <= 10 ms: {met(p99, 'scrape_p99_ms')}"),
        (f"exporter ({stack}): resident memory", f"{rss:.0f} MiB",
         f"VmRSS after refreshes and scrapes (the larger of two readings); target <= 50 MiB: {met(rss, 'rss_mib')}"),
        (f"exporter ({stack}): CPU at the default 10 s interval", f"{cpu:.2f} % of a core",
         f"the exporter process over {window:.0f} s, scraped every 15 s (the fake tools beside it: {tools:.2f} %); "
         f"target <= 1 %: {met(cpu, 'cpu_percent')}"),
    ]


def run(work: Path) -> Tuple[Rows, Dict[str, Dict[str, List[float]]]]:
    """Rows and samples for every installed stack."""
    window = float(os.environ.get("BENCH_EXPORTER_WINDOW", "60"))
    rows: Rows = []
    samples: Dict[str, Dict[str, List[float]]] = {}
    for stack in ("pypi", "debian"):
        found = _stack(stack)
        if found is None:
            print(f"bench: exporter on {stack} skipped: its libraries are not installed (`make install`)",
                  file=sys.stderr)
            continue
        samples[stack] = measure(stack, found[0], found[1], work, window=window)
        rows += rows_of(stack, samples[stack], window)
    return rows, samples


if __name__ == "__main__":  # the exporter's rows alone: python scripts/bench_exporter.py
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-exporter-", dir="/var/tmp") as d:
        result, _ = run(Path(d))
    for what, median, note in result:
        print(f"{what:55} {median:>16}  {note}")
