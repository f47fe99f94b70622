"""The device plugin's figures for `make bench` (scripts/bench.py calls :func:`run`).

``xpu-cdi device-plugin`` runs as its own process on a fake 8-card node,
against the stand-in kubelet of the tests (``kubeletkit.FakeKubelet``, stubs
from the upstream k8s.io/kubelet module, tests/support/kubeproto.py; where they cannot be had these rows are left out,
saying why), on each Python stack that is installed (PyPI's grpcio/protobuf
in the venv, Debian's python3-grpcio/python3-protobuf):

* Allocate latency, client side: one card per call, >= 200 calls on one
  channel (as kubelet keeps one), median and p99;
* resident memory (VmRSS) of the daemon once it has registered and settled;
* kubelet restart: the stand-in dies and starts again (every socket wiped,
  a new kubelet.sock) -> the plugin's Register arriving (median and worst of
  the rounds), and the registrations per restart, counted after a quiet
  second (1: no restart handled twice, no storm);
* a card's node unlinked -> the ListAndWatch update marking it Unhealthy.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

from support import HANG, fakehost

TARGETS = {"allocate_p99_ms": 5.0, "rss_mib": 60.0, "reregister_s": 1.0, "unhealthy_s": 2.0,
           "registrations_per_restart": 1.0}
Rows = List[Tuple[str, str, str]]


def _p99(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(stack: str, work: Path, calls: int = 300, restarts: int = 20, vanishes: int = 10) -> Dict[str, List[float]]:
    """Samples (seconds, MiB) of one stack."""
    from support import kubeletkit
    from click.testing import CliRunner

    from xpu_cdi.cli import main

    root = work / f"host-{stack}"
    root.mkdir()
    host = fakehost.kunlunxin(root, cards=8)
    for n in (0, 1):
        (root / "sys" / "devices" / "system" / "node" / f"node{n}").mkdir(parents=True, exist_ok=True)
    spec_dir, plugin_dir = work / f"cdi-{stack}", work / f"k-{stack}"
    plugin_dir.mkdir()
    res = CliRunner().invoke(main, ["generate", *host.cli_roots, "--spec-dir", str(spec_dir)])
    assert res.exit_code == 0, res.output
    kubelet = kubeletkit.FakeKubelet(plugin_dir)
    proc = kubeletkit.PluginProcess(stack, [*host.cli_roots, "--plugin-dir", str(plugin_dir), "--spec-dir",
                                            str(spec_dir), "--status-file", str(work / f"st-{stack}.json"),
                                            "--uevents", "none"], work / f"plugin-{stack}.log")
    out: Dict[str, List[float]] = {"allocate_s": [], "rss_mib": [], "reregister_s": [], "unhealthy_s": [],
                                   "registrations_per_restart": []}
    try:
        kubelet.wait_registered()
        kubelet.wait_for(lambda: len(kubelet.latest()) == 8, message="8 cards")
        time.sleep(1.0)
        out["rss_mib"].append(_rss_mib(proc.proc.pid))
        stub = kubelet.plugin()
        pb2 = kubelet.pb2
        for i in range(calls + 20):
            req = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=[str(i % 8)])])
            t = time.perf_counter()
            stub.Allocate(req, timeout=HANG)
            if i >= 20:  # the first calls open the channel
                out["allocate_s"].append(time.perf_counter() - t)
        before = kubelet.count()
        for _ in range(restarts):
            t0 = kubelet.restart()
            reg = kubelet.wait_registered_with(kubelet.instance, timeout=HANG)
            out["reregister_s"].append(reg.at - t0)
        time.sleep(1.0)  # a quiet second: a late second registration, or a storm, counts too
        out["registrations_per_restart"].append((kubelet.count() - before) / restarts)
        for i in range(vanishes):
            card = str(i % 8)
            node = host.path(f"/dev/xpu{card}")
            kubelet.wait_for(lambda: kubelet.latest().get(card, ("",))[0] == "Healthy", message="Healthy")
            node.unlink()
            t0 = time.monotonic()
            kubelet.wait_for(lambda: kubelet.latest().get(card, ("",))[0] == "Unhealthy", message="Unhealthy")
            with kubelet.cond:
                when = next(t for t, devs in kubelet.lists if t >= t0 and devs.get(card, ("",))[0] == "Unhealthy")
            out["unhealthy_s"].append(when - t0)
            fakehost.mknod(node, fakehost.XPU_MAJOR, int(card))
    finally:
        proc.stop()
        kubelet.stop()
    return out


def rows_of(stack: str, s: Dict[str, List[float]]) -> Rows:
    a = [v * 1e3 for v in s["allocate_s"]]
    p99, med = _p99(a), statistics.median(a)
    rr, uh, per = s["reregister_s"], s["unhealthy_s"], s["registrations_per_restart"][0]

    def met(value: float, key: str) -> str:
        return "met" if value <= TARGETS[key] else "**missed**"

    return [
        (f"device plugin ({stack}): Allocate, 1 card", f"{med:.2f} ms",
         f"p99 {p99:.2f} ms over {len(a)} calls, client side; target p99 <= 5 ms: {met(p99, 'allocate_p99_ms')}"),
        (f"device plugin ({stack}): resident memory", f"{s['rss_mib'][0]:.0f} MiB",
         f"VmRSS after registering 8 cards; target <= 60 MiB: {met(s['rss_mib'][0], 'rss_mib')}"),
        (f"device plugin ({stack}): kubelet restart -> registered", f"{statistics.median(rr) * 1e3:.0f} ms",
         f"worst {max(rr) * 1e3:.0f} ms over {len(rr)} restarts (sockets wiped, new kubelet.sock); "
         f"target <= 1 s: {met(max(rr), 'reregister_s')}; {per:.2f} registrations per restart "
         f"(target 1: {'met' if per == TARGETS['registrations_per_restart'] else '**missed**'})"),
        (f"device plugin ({stack}): node vanished -> Unhealthy", f"{statistics.median(uh) * 1e3:.0f} ms",
         f"worst {max(uh) * 1e3:.0f} ms over {len(uh)} cards; target <= 2 s: {met(max(uh), 'unhealthy_s')}"),
    ]


def run(work: Path) -> Tuple[Rows, Dict[str, Dict[str, List[float]]]]:
    """Rows and samples for every installed stack; ``([], {})`` with a note where nothing can run."""
    from support import kubeletkit
    import pytest

    rows: Rows = []
    samples: Dict[str, Dict[str, List[float]]] = {}
    for stack in ("pypi", "debian"):
        try:
            kubeletkit.stack_python(stack)
            kubeletkit.stubs()
        except pytest.skip.Exception as why:  # the same reasons the tests skip for
            print(f"bench: device plugin on {stack} skipped: {why}", file=sys.stderr)
            continue
        samples[stack] = measure(stack, work)
        rows += rows_of(stack, samples[stack])
    return rows, samples
