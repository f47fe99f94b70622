"""`make bench`, the DRA driver's prepare latency for an Ascend vNPU claim, the vendor tool's own time apart.

A fake 310P node (four chips, tests/support/fakehost.py) with the stand-in npu-smi
(tests/support/npusmi.py) as its tool and the in-memory API stand-in: each round prepares a
claim for a ``vir02`` partition (checkpoint intent, npu-smi create-vnpu, the node's stat, the
claim-scoped spec written atomically, the checkpoint again) and unprepares it.  Reported:
prepare's wall time, the tool's share of it (the stand-in is a Python process: ~its start-up),
and the difference, p50 / p99 over the rounds; target: p99 of the difference <= 30 ms (issue 27).
Needs root (the stand-in makes device nodes).  scripts/bench.py calls :func:`run`; alone:

    .venv/bin/python scripts/bench_vnpu.py [ROUNDS]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "dra"))

Rows = List[Tuple[str, str, str]]
TARGET_P99_MS = 30.0  # prepare without the tool (issue 27)
ROUNDS = 100


def pct(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(rounds: int) -> Dict[str, List[float]]:
    from support.fakeapi import FakeKube
    from test_vnpu import KIND, NpuNode, result  # the unit tests' node: one set-up for both
    from xpu_cdi.node import vnpu

    tool_time: List[float] = []
    run = vnpu.Tool.run

    def timed(self: Any, args: Sequence[str]) -> List[str]:
        t = time.perf_counter()
        try:
            return run(self, args)
        finally:
            tool_time.append(time.perf_counter() - t)

    vnpu.Tool.run = timed  # type: ignore[method-assign]
    base = Path(tempfile.mkdtemp(prefix="bench-vnpu-"))
    sockets = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    out: Dict[str, List[float]] = {"prepare": [], "tool": [], "driver": []}
    try:
        node = NpuNode(base / "host", sockets)
        kube = FakeKube()
        d = node.daemon(kube)
        driver = d.drivers[KIND]
        try:
            for n in range(rounds):
                uid = f"uid-{n}"
                kube.add_claim("ns", f"c{n}", uid, [result("0-vir02-0")])
                tool_time.clear()
                t = time.perf_counter()
                (devices, error), = driver.prepare([("ns", f"c{n}", uid)]).values()
                took = time.perf_counter() - t
                assert not error and devices[0].cdi, error
                out["prepare"].append(took)
                out["tool"].append(sum(tool_time))
                out["driver"].append(took - sum(tool_time))
                assert driver.unprepare([("ns", f"c{n}", uid)]) == {uid: ""}
                del kube.claims[("ns", f"c{n}")]
        finally:
            d.close()
    finally:
        vnpu.Tool.run = run  # type: ignore[method-assign]
        shutil.rmtree(sockets, ignore_errors=True)
        from support import fakehost

        fakehost.remove_tree(base / "host")
        shutil.rmtree(base, ignore_errors=True)
    return out


def rows_of(got: Dict[str, List[float]], load: float) -> Rows:
    """The bench table's rows: prepare without the tool against the target, the tool's own time apart."""
    def ms(key: str, q: float) -> float:
        return pct(got[key], q) * 1000

    p99 = ms("driver", 0.99)
    met = "met" if p99 <= TARGET_P99_MS else "**missed**"
    n = len(got["driver"])
    return [
        ("vNPU claim: prepare without the tool", f"{ms('driver', 0.5):.1f} ms",
         f"p99 {p99:.1f} ms over {n} prepares of a vir02 claim on a fake 310P node, in process (checkpoint "
         f"intent, the node's stat, the claim-scoped spec, the checkpoint), load {load:.1f}; "
         f"target p99 <= {TARGET_P99_MS:.0f} ms: {met}"),
        ("  the tool's own time (npu-smi create-vnpu)", f"{ms('tool', 0.5):.1f} ms",
         f"p99 {ms('tool', 0.99):.1f} ms: the stand-in (a Python process), not the real npu-smi; reported apart"),
        ("  prepare, all of it", f"{ms('prepare', 0.5):.1f} ms", f"p99 {ms('prepare', 0.99):.1f} ms"),
    ]


def run(rounds: int = ROUNDS) -> Tuple[Rows, Dict[str, List[float]]]:
    """The rows and samples (seconds) of *rounds* prepares; ``([], {})`` with a note when not root."""
    if os.geteuid() != 0:
        print("bench: vNPU prepare skipped: needs root (the stand-in npu-smi makes device nodes)", file=sys.stderr)
        return [], {}
    got = measure(rounds)
    return rows_of(got, os.getloadavg()[0]), got


def main(argv: List[str]) -> int:
    if os.geteuid() != 0:
        print("bench_vnpu: needs root (the stand-in npu-smi makes device nodes)", file=sys.stderr)
        return 1
    rows, _ = run(int(argv[0]) if argv else ROUNDS)
    width = max(len(r[0]) for r in rows)
    print("\n".join(f"  {name:<{width}}  {value:>10}  {note}" for name, value, note in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
