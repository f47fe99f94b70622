"""The wrapper runtime's cost on a container start (part of `make bench`).

Median wall time of `<runtime> run` of a busybox `true`, interleaved round
by round (machine noise hits every variant alike), for:

* plain runc (the baseline; the container's XPU_VISIBLE_DEVICES=0-7 is
  ignored);
* xpu-container-runtime through its fast launcher
  (`xpu-cdi runtime install-launcher`), injecting all 8 cards of a fake
  Kunlunxin host: the wrapper's own work plus runc creating 9 nodes, their
  cgroup rules and the driver mounts;
* the same launcher for a container that asks for nothing (its cost on
  every other container when it is the default runtime);
* both through pip's console script (site start-up, .pth files);
* plain runc on the config.json the wrapper writes for 8 cards, so that
  runc's own cost of making the nodes, rules and mounts is told apart from
  the wrapper's.

Each run gets a fresh config.json (as a real container does); `delete` is
not timed.  Run alone: `.venv/bin/python scripts/bench_wrapper.py [ROUNDS]`
(root).  `scripts/bench.py` calls :func:`bench`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import fakehost  # noqa: E402
import runtimes  # noqa: E402

from xpu_cdi.runtime import launcher, wrapper  # noqa: E402

Rows = List[Tuple[str, str, str]]
BIN = Path(sys.executable).parent


def _run(runtime: str, bundle: "runtimes.Bundle", pristine: bytes, env: Dict[str, str]) -> float:
    (bundle.dir / "config.json").write_bytes(pristine)
    cid = runtimes.unique("xwb")
    t = time.perf_counter()
    r = subprocess.run([runtime, "run", "--bundle", str(bundle.dir), cid], capture_output=True,
                       stdin=subprocess.DEVNULL, env=env)
    elapsed = time.perf_counter() - t
    subprocess.run(["runc", "delete", "--force", cid], capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{runtime} run failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return elapsed


def measure(work: Path, rounds: int = 40) -> Dict[str, List[float]]:
    """Seconds per `run` for each variant, interleaved round by round."""
    host = fakehost.kunlunxin(work / "wrapper-host", cards=8)
    specs = work / "wrapper-cdi"
    subprocess.run([str(BIN / "xpu-cdi"), "generate", *host.cli_roots, "--spec-dir", str(specs),
                    "--ld-library-path-env"], check=True, capture_output=True)
    fast = str(work / "xpu-container-runtime")
    launcher.install(fast)
    console = str(BIN / "xpu-container-runtime")
    env = dict(os.environ, XPU_CDI_SPEC_DIRS=str(specs))
    variants = {"runc": ("runc", ["XPU_VISIBLE_DEVICES=0-7"]),
                "runc8": ("runc", ["XPU_VISIBLE_DEVICES=0-7"]),  # config.json already edited (below)
                "fast8": (fast, ["XPU_VISIBLE_DEVICES=0-7"]),
                "fast0": (fast, []),
                "console8": (console, ["XPU_VISIBLE_DEVICES=0-7"]),
                "console0": (console, [])}
    bundles = {}
    for name, (_rt, cenv) in variants.items():
        b = runtimes.Bundle(work)
        b.set_process(["true"], env=cenv)
        b.write()
        if name == "runc8":  # what the wrapper writes: runc's own share of giving 8 cards
            wrapper.prepare(str(b.dir), {"XPU_CDI_SPEC_DIRS": str(specs)})
        bundles[name] = (b, (b.dir / "config.json").read_bytes())
    samples: Dict[str, List[float]] = {k: [] for k in [*variants, "python"]}
    for name, (rt, _cenv) in variants.items():  # warm caches (page cache, pyc files) before timing
        _run(rt, *bundles[name], env)
    python = [os.path.realpath(sys.executable), "-I", "-S", "-c", "pass"]
    for _ in range(rounds):
        for name, (rt, _cenv) in variants.items():
            samples[name].append(_run(rt, *bundles[name], env))
        t = time.perf_counter()
        subprocess.run(python, check=True)
        samples["python"].append(time.perf_counter() - t)
    return samples


def cpu_times(work: Path, rounds: int = 40) -> Dict[str, float]:
    """Median CPU ms (user + sys) of one `create` through the launcher, with
    /bin/true as the real runtime: the wrapper's own work, unaffected by what
    else the machine runs (wall times on a shared machine are not)."""
    import resource

    fast = str(work / "xpu-container-runtime")
    env = dict(os.environ, XPU_CDI_SPEC_DIRS=str(work / "wrapper-cdi"), XPU_CDI_RUNTIME="/bin/true")
    cases = {"floor": ([os.path.realpath(sys.executable), "-I", "-S", "-c", "pass"], None)}
    for name, cenv in (("cpu0", []), ("cpu8", ["XPU_VISIBLE_DEVICES=0-7"])):
        b = runtimes.Bundle(work)
        b.set_process(["true"], env=cenv)
        b.write()
        cases[name] = ([fast, "create", "--bundle", str(b.dir), "x"], (b, (b.dir / "config.json").read_bytes()))
    out: Dict[str, List[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, (cmd, bundle) in cases.items():
            if bundle:
                (bundle[0].dir / "config.json").write_bytes(bundle[1])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[name].append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3)
    return {k: statistics.median(v) for k, v in out.items()}


def bench(work: Path, rounds: int = 40) -> Rows:
    """Rows for scripts/bench.py: (name, value, note)."""
    s = measure(work, rounds)
    cpu = cpu_times(work, rounds)
    med = {k: statistics.median(v) * 1e3 for k, v in s.items()}
    base = med["runc"]
    return [
        ("runc run (baseline)", f"{base:.1f} ms", f"median of {rounds}, interleaved with the wrapper runs"),
        ("wrapper overhead, 8 cards", f"{med['fast8'] - med['runc8']:.1f} ms",
         "xpu-container-runtime (fast launcher) run minus plain runc on the same edited config.json"),
        ("  runc's own share of 8 cards", f"{med['runc8'] - base:.1f} ms",
         "plain runc, edited config.json (9 nodes, rules, mounts) minus unedited"),
        ("wrapper overhead, nothing asked", f"{med['fast0'] - base:.1f} ms",
         "reads config.json, finds no request, execs runc"),
        ("  python -I -S start (the floor)", f"{med['python']:.1f} ms",
         "what any Python wrapper pays before its first line"),
        ("  via pip's console script, 8 cards", f"{med['console8'] - med['runc8']:.1f} ms",
         "same, slow start-up (site, .pth files)"),
        ("  via pip's console script, nothing", f"{med['console0'] - base:.1f} ms", ""),
        ("wrapper CPU, nothing asked", f"{cpu['cpu0'] - cpu['floor']:.1f} ms",
         f"user+sys of one create beyond python -I -S ({cpu['floor']:.1f} ms); load-independent"),
        ("wrapper CPU, 8 cards", f"{cpu['cpu8'] - cpu['floor']:.1f} ms",
         "the same with 8 cards: parse, registry (and its imports), edit, write"),
    ]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    if os.geteuid() != 0:
        sys.exit("bench_wrapper: needs root (runc, mknod)")
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-wrapper-") as tmp:
        try:
            rows = bench(Path(tmp), rounds)
        finally:
            fakehost.remove_tree(Path(tmp))
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    main()
