"""The hook's cost on a container start (part of `make bench`).

Median wall time of `runc run` of a busybox `true` with `xpu-cdi-hook
prestart` injecting all 8 cards of a fake Kunlunxin host, minus the median
with `/bin/true` as the prestart hook, measured interleaved in one run
(machine noise hits both alike).  Also: a bare `python3 -I -S -c pass` as
the hook (the interpreter's own start-up, the floor of any Python hook),
the same cards written into config.json with `/bin/true` as the hook
(runc's own cost of the injected edits, which CDI mode pays as well),
the hook when the container asks for nothing (its cost on every other
container), and the same injection through pip's console script instead
of the fast launcher.

Run alone: `.venv/bin/python scripts/bench_hook.py [ROUNDS]` (root).
`scripts/bench.py` calls :func:`bench`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import fakehost  # noqa: E402
import runtimes  # noqa: E402

from xpu_cdi.hook import launcher  # noqa: E402

Rows = List[Tuple[str, str, str]]
TARGET_MS = 10.0


def _run(bundle: "runtimes.Bundle", cid: str) -> float:
    t = time.perf_counter()
    r = subprocess.run(["runc", "run", "--bundle", str(bundle.dir), cid], capture_output=True,
                       stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        subprocess.run(["runc", "delete", "--force", cid], capture_output=True)
        raise RuntimeError(f"runc run failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return elapsed


def measure(work: Path, rounds: int = 40) -> Dict[str, List[float]]:
    """Seconds per `runc run` for each variant, interleaved round by round."""
    host = fakehost.kunlunxin(work / "hook-host", cards=8)
    specs = work / "hook-cdi"
    hook = work / "xpu-cdi-hook"
    launcher.install(str(hook))
    subprocess.run([str(Path(sys.executable).parent / "xpu-cdi"), "generate", *host.cli_roots,
                    "--spec-dir", str(specs), "--hook-path", str(hook)], check=True, capture_output=True)
    env = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"XPU_CDI_SPEC_DIRS={specs}"]
    variants = {
        "true": ("/bin/true", ["true"], ["XPU_VISIBLE_DEVICES=0-7"]),
        "inject8": (str(hook), ["xpu-cdi-hook", "prestart"], ["XPU_VISIBLE_DEVICES=0-7"]),
        "noop": (str(hook), ["xpu-cdi-hook", "prestart"], []),
        "python": (os.path.realpath(sys.executable), ["python3", "-I", "-S", "-c", "pass"],
                   ["XPU_VISIBLE_DEVICES=0-7"]),
        "console": (str(Path(sys.executable).parent / "xpu-cdi-hook"), ["xpu-cdi-hook", "prestart"],
                    ["XPU_VISIBLE_DEVICES=0-7"]),
    }
    bundles = {}
    for name, (path, args, cenv) in variants.items():
        b = runtimes.Bundle(work)
        b.set_process(["true"], env=cenv)
        b.add_hook("prestart", path, args, env=env)
        b.write()
        bundles[name] = b
    bundles["cdi"] = cdi_equivalent(work, json.loads(next(specs.glob("*.json")).read_text()), env)
    samples: Dict[str, List[float]] = {k: [] for k in bundles}
    for name in bundles:  # warm caches (page cache, pyc files) before timing
        _run(bundles[name], runtimes.unique("xcb"))
    for _ in range(rounds):
        for name in bundles:
            samples[name].append(_run(bundles[name], runtimes.unique("xcb")))
    return samples


def cdi_equivalent(work: Path, spec: Dict[str, Any], env: List[str]) -> "runtimes.Bundle":
    """The same 8 cards put into config.json as a CDI runtime would (nodes, allow
    rules, read-only binds), /bin/true as the hook: what runc itself spends on
    the injected edits, whoever injects them."""
    cards = {str(i) for i in range(8)}
    nodes = [n for d in spec["devices"] if d["name"] in cards for n in d["containerEdits"]["deviceNodes"]]
    nodes += spec["containerEdits"].get("deviceNodes", [])
    b = runtimes.Bundle(work)
    b.set_process(["true"], env=["XPU_VISIBLE_DEVICES=0-7"])
    b.add_hook("prestart", "/bin/true", ["true"], env=env)
    b.config["linux"]["devices"] = [{k: n[k] for k in ("path", "type", "major", "minor", "fileMode")} for n in nodes]
    b.config["linux"]["resources"]["devices"] += [
        {"allow": True, "type": n["type"], "major": n["major"], "minor": n["minor"], "access": "rwm"} for n in nodes]
    b.config["mounts"] += [{"destination": m["containerPath"], "source": m["hostPath"], "type": "bind",
                            "options": ["rbind", "ro", "nosuid", "nodev"]} for m in spec["containerEdits"]["mounts"]]
    b.write()
    return b


def bench(work: Path, rounds: int = 40) -> Rows:
    """Rows for scripts/bench.py: (name, value, note)."""
    s = measure(work, rounds)
    med = {k: statistics.median(v) * 1e3 for k, v in s.items()}
    over = med["inject8"] - med["true"]
    return [
        ("runc run, /bin/true hook", f"{med['true']:.1f} ms", f"median of {rounds}, interleaved"),
        ("hook overhead, 8 cards", f"{over:.1f} ms",
         f"runc run with the hook minus with /bin/true (target <= {TARGET_MS:.0f} ms: "
         f"{'met' if over <= TARGET_MS else 'NOT met'})"),
        ("  of which interpreter start", f"{med['python'] - med['true']:.1f} ms",
         "`python3 -I -S -c pass` as the hook: the floor of any Python hook"),
        ("  same cards via config.json", f"{med['cdi'] - med['true']:.1f} ms",
         "runc's own cost of the 9 nodes, 9 rules and 2 mounts (CDI mode pays it too)"),
        ("hook overhead, nothing asked", f"{med['noop'] - med['true']:.1f} ms", "a container without devices"),
        ("  via pip's console script", f"{med['console'] - med['true']:.1f} ms",
         "same injection, slow launcher (site, .pth)"),
    ]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    if os.geteuid() != 0:
        sys.exit("bench_hook: needs root (runc, mknod)")
    with tempfile.TemporaryDirectory(prefix="xpu-cdi-bench-hook-") as tmp:
        try:
            rows = bench(Path(tmp), rounds)
        finally:
            fakehost.remove_tree(Path(tmp))
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    main()
