"""`make demo`: the main job on a simulated Kunlunxin P800 host.

1. build a fake 8-card host (real char nodes with an unused major, a driver
   tree, a sysfs PCI tree) in a temp dir;
2. `xpu-cdi generate` a spec for it, `xpu-cdi validate` and `xpu-cdi list` it;
3. run a real container with podman (CDI) asking for card 3, and print what
   it sees: the node, that the cgroup allows it (ENXIO, not EPERM), the
   read-only driver mount;
4. run a busybox bundle under runc with the xpu-cdi-hook prestart hook and
   CXPU_VISIBLE_DEVICES=1,3 (the path for runtimes without CDI).

Everything is removed at the end, even on failure.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support import fakehost  # noqa: E402
from support import runtimes  # noqa: E402

BIN = Path(sys.executable).parent
VENDOR = "demo.kunlunxin.com"  # not kunlunxin.com: never collide with a real spec in /etc/cdi
KIND = f"{VENDOR}/xpu"
INSIDE = ("echo '--- nodes:'; ls -l /dev/xpu*; "
          "echo '--- write to /dev/xpu3 (ENXIO = cgroup allows it, no driver behind the fake node):'; "
          "(echo x > /dev/xpu3) 2>&1; "
          "echo '--- driver mount:'; grep ' /usr/local/xpu ' /proc/mounts; cat /usr/local/xpu/version; "
          "ls /usr/local/xpu/lib64; true")


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def run(cmd: list, **kw: object) -> subprocess.CompletedProcess:
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"demo: command failed with exit {r.returncode}")
    return r


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="xpu-cdi-demo-"))
    spec = Path("/etc/cdi") / f"{VENDOR}-xpu.json"
    podman = None
    try:
        step("a simulated P800 host with 8 cards")
        host = fakehost.kunlunxin(work / "host", 8)
        print(f"fake host at {host.root}: /dev/xpu0..7 (c 240:0..7), /dev/xpuctrl (c 240:200), /usr/local/xpu")

        step("generate, validate, list")
        Path("/etc/cdi").mkdir(exist_ok=True)
        run([BIN / "xpu-cdi", "generate", *host.cli_roots, "--vendor", VENDOR, "--output", spec])
        run([BIN / "xpu-cdi", "validate", spec])
        run([BIN / "xpu-cdi", "list", "--spec-dir", "/etc/cdi"])

        step(f"podman run --device {KIND}=3 (CDI: the runtime injects the spec)")
        podman = runtimes.Podman(work / "podman")
        r = podman.run(["--device", f"{KIND}=3"], ["sh", "-c", INSIDE])
        print(r.stdout + r.stderr)
        if r.returncode != 0 or "No such device or address" not in r.stdout:
            raise SystemExit("demo: the container did not get card 3")

        step("runc + xpu-cdi-hook prestart, CXPU_VISIBLE_DEVICES=1,3 (runtimes without CDI)")
        specs = work / "cdi"
        run([BIN / "xpu-cdi", "generate", *host.cli_roots, "--spec-dir", specs])
        bundle = runtimes.Bundle(work)
        bundle.set_process(["sh", "-c", INSIDE.replace("xpu3", "xpu1")], env=["CXPU_VISIBLE_DEVICES=1,3"])
        log = work / "hook.log"
        bundle.add_hook("prestart", str(BIN / "xpu-cdi-hook"), ["xpu-cdi-hook", "prestart", "--log", str(log)],
                        env=[f"XPU_CDI_SPEC_DIRS={specs}"])
        r = runtimes.run_runc(bundle)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            raise SystemExit("demo: runc with the hook failed")
        # what the hook did, one line per injection
        print(f"--- the hook's log:\n{log.read_text()}")
        print("demo: done — both paths gave the container exactly the cards it asked for")
    finally:
        spec.unlink(missing_ok=True)
        Path(str(spec) + ".xpu-cdi").unlink(missing_ok=True)
        if podman is not None:
            podman.close()
        fakehost.remove_tree(work)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
