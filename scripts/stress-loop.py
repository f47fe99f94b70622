"""`make stress-loop`: the timing-sensitive modules, RUNS times in a row, beside a CPU hog.

`stress-ng --cpu N` (N = the machine's cores) keeps every core busy for the whole loop; each run
is `pytest <set> -n 2 --dist loadgroup` as `make test` runs it, then the suite's leak check made
again from outside (support.leaks.after: the run's daemons, cgroups and mounts still there once
pytest has exited).  One line per run goes to the log (result, duration, load average); the loop
stops at the first failure or leftover (its output kept beside the log) and exits non-zero.
The hog is killed however the loop ends.  The set and why: docs/testing.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import devdirs, leaks

REPO = Path(__file__).resolve().parents[1]

#: What waits on something another process or thread does (daemons, events, signals, logs,
#: deadlines): docs/testing.md#under-load says why each is here and what is left out.
SET = [
    "tests/deviceplugin", "tests/dra", "tests/exporter", "tests/labels", "tests/test_watch.py",
    "tests/doctor/test_doctor_plugin.py", "tests/e2e/test_demo.py", "tests/e2e/test_hook_failures.py",
    "tests/e2e/test_concurrency.py", "tests/e2e/test_hostile_race.py", "tests/test_crash_safety.py",
    "tests/k8s/test_deviceplugin_node.py",
]
#: Also waiting on processes, with bounds only (a hang): run beside the hog less often (--wide).
WIDER = [
    "tests/doctor/test_doctor_olddriver.py", "tests/e2e/test_hook_ldcache.py", "tests/e2e/test_deviceplugin_podman.py",
    "tests/test_cli.py", "tests/test_npusmi_standin.py", "tests/host/test_wiring.py", "tests/host/test_install.py",
    "tests/hook/test_prestart_binary.py", "tests/runtime/test_containerd_live.py", "tests/cdi/test_registry_bounds.py",
]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def commit() -> str:
    """The checkout's commit, and whether files differ from it: what a run tested."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--log", type=Path, default=REPO / "stress-loop.log")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() or 1, help="stress-ng --cpu workers")
    ap.add_argument("--wide", action="store_true", help="the wider set too")
    ap.add_argument("paths", nargs="*", help="test paths (default: the timing-sensitive set)")
    args = ap.parse_args()
    if shutil.which("stress-ng") is None:
        sys.exit("stress-loop: no stress-ng (make stress-loop installs it: scripts/install-deps.sh stress-ng)")
    base = devdirs.device_capable_base() or Path("/var/tmp")
    basetemp = base / f"xpu-cdi-stress-{os.getpid()}"
    paths = args.paths or SET + (WIDER if args.wide else [])
    log = args.log.open("a", buffering=1)
    hog = subprocess.Popen(["stress-ng", "--cpu", str(args.cpu), "--quiet"], stdin=subprocess.DEVNULL,
                           start_new_session=True)
    log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} stress-ng --cpu {args.cpu} (pid {hog.pid}); "
              f"{args.runs} runs of: {' '.join(paths)}\n")
    pytest = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the hog is killed on a kill too
    # Ctrl-C stops a run with its teardown; started in the background by a shell without job
    # control, SIGINT is ignored, and pytest would inherit that (a handler is reset at exec)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for n in range(1, args.runs + 1):
            out = args.log.with_name(f"{args.log.stem}-run{n}.out")
            t0, before, started = time.monotonic(), load(), time.strftime("%H:%M:%S")
            with out.open("w") as f:
                pytest = subprocess.Popen([sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:randomly", "-n", "2",
                                           "--dist", "loadgroup", "--durations=5", f"--basetemp={basetemp}"],
                                          cwd=REPO, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                rc = pytest.wait()
            seconds = time.monotonic() - t0
            left = leaks.after(basetemp)
            summary = out.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            log.write(f"run {n}/{args.runs} at {started} ({commit()}): rc={rc} {seconds:.0f}s "
                      f"load {before} -> {load()} leftovers={'yes' if left else 'none'} | {summary[0]}\n")
            if left:
                log.write(left + "\n")
            if rc != 0 or left:
                log.write(f"stopped at run {n}: output in {out}\n")
                return 1
            text = out.read_text(errors="replace")
            if "slowest" in text:  # the slowest tests, to see where a run's time goes
                log.write("".join(f"    {ln}\n" for ln in text.split("slowest", 1)[1].splitlines()[1:6]))
            out.unlink()
        return 0
    finally:
        if pytest is not None and pytest.poll() is None:
            pytest.send_signal(signal.SIGINT)  # its teardown stops what its tests started
            pytest.wait()
            left = leaks.after(basetemp)
            log.write(f"interrupted; leftovers: {left or 'none'}\n")
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
        shutil.rmtree(basetemp, ignore_errors=True)  # after the check: its mounts are gone
        log.close()


if __name__ == "__main__":
    sys.exit(main())
