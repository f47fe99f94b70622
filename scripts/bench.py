"""`make bench`: the figures that matter, as ratios measured in one run.

Not a test: timings depend on the machine.  Prints a table; run it on an
idle machine.  Sections:

* generate: wall time of the whole `xpu-cdi generate` process for a fake
  8-card host, and its scaling at 8, 512 and 4096 simulated devices;
* resolver: the C batch resolver against a plain os.stat loop (the
  pure-Python twin, same output) on 10,000 nodes;
* hook / wrapper: overhead on `runc run` (scripts/bench_hook.py,
  scripts/bench_wrapper.py), when those exist.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import fakehost  # noqa: E402
from xpu_cdi import _pyresolver, resolver  # noqa: E402

BIN = Path(sys.executable).parent
Rows = List[Tuple[str, str, str]]


def median_ms(samples: List[float]) -> float:
    return statistics.median(samples) * 1e3


def time_process(cmd: List[str], rounds: int) -> List[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return out


def bench_generate(work: Path, rounds: int = 15) -> Tuple[Rows, Dict[int, List[float]]]:
    rows: Rows = []
    scaling: Dict[int, List[float]] = {}
    sizes = (8, 512, 4096)
    hosts = {}
    for n in sizes:
        hosts[n] = fakehost.kunlunxin(work / f"host{n}", cards=n, sysfs=(n == 8))
    for n in sizes:
        scaling[n] = []
    # interleave sizes so machine noise hits them alike
    for _ in range(rounds):
        for n in sizes:
            out = work / f"spec{n}.json"
            scaling[n] += time_process([str(BIN / "xpu-cdi"), "generate", *hosts[n].cli_roots,
                                        "--profile", "kunlunxin", "--output", str(out)], 1)
    base = median_ms(scaling[8])
    rows.append(("generate, 8 cards (whole process, median)", f"{base:.1f} ms", "target < 150 ms"))
    for n in sizes[1:]:
        m = median_ms(scaling[n])
        per = (m - base) / (n - 8)
        rows.append((f"generate, {n} devices", f"{m:.1f} ms", f"{per * 1000:.0f} us per extra device"))
    return rows, scaling


def bench_resolver(work: Path, count: int = 10000, rounds: int = 25) -> Rows:
    d = work / "nodes"
    paths = []
    for i in range(count):
        p = d / f"xpu{i}"
        if not paths:
            d.mkdir(parents=True)
        fakehost.mknod(p, fakehost.XPU_MAJOR, i % 1048576)
        paths.append(str(p))
    same = resolver.stat_nodes(paths) == _pyresolver.stat_nodes(paths)
    c_t: List[float] = []
    py_t: List[float] = []
    for _ in range(rounds):  # interleaved
        for fn, acc in ((resolver.stat_nodes, c_t), (_pyresolver.stat_nodes, py_t)):
            t = time.perf_counter()
            fn(paths)
            acc.append(time.perf_counter() - t)
    c, py = median_ms(c_t), median_ms(py_t)
    return [(f"resolver C ({resolver.BACKEND}), {count} nodes", f"{c:.2f} ms", ""),
            (f"os.stat loop (pure-Python twin), {count} nodes", f"{py:.2f} ms", ""),
            ("resolver speed-up", f"{py / c:.2f}x", f"identical output: {same}; target >= 3x")]


def optional(module: str) -> Callable[[Path], Rows] | None:
    if importlib.util.find_spec(module) is None:
        return None
    return getattr(__import__(module), "bench")


def main() -> None:
    table: Rows = []
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-") as tmp:
        work = Path(tmp)
        try:
            rows, _ = bench_generate(work)
            table += rows
            table += bench_resolver(work)
            for mod in ("bench_hook", "bench_wrapper"):
                fn = optional(mod)
                if fn is not None:
                    table += fn(work)
        finally:
            fakehost.remove_tree(work)
    width = max(len(r[0]) for r in table)
    print(f"\nxpu-cdi bench on {os.uname().nodename} ({os.cpu_count()} CPUs, {os.uname().release})")
    for name, value, note in table:
        print(f"  {name:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    main()
