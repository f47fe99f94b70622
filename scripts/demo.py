"""`make demo`: the main job on a simulated Kunlunxin P800 host.

1. build a fake 8-card host (real char nodes with an unused major, a driver
   tree, a sysfs PCI tree) in a temp dir;
2. `xpu-cdi generate` a spec for it into /etc/cdi (where podman reads specs),
   `xpu-cdi validate` and `xpu-cdi list` it;
3. run a real container with podman (CDI) asking for card 3, and print what
   it sees: the node, that the cgroup allows it (ENXIO, not EPERM), the
   read-only driver mount;
4. run a busybox bundle under runc with the xpu-cdi-hook prestart hook and
   CXPU_VISIBLE_DEVICES=1,3 (the path for runtimes without CDI).

Everything it made is removed at the end: on success, on failure, on Ctrl-C
or SIGTERM.  The spec's vendor is demo.kunlunxin.com, so it never replaces a
real kunlunxin.com spec in /etc/cdi.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

from support import devdirs, fakehost, runtimes

BIN = Path(sys.executable).parent
ETC_CDI = Path("/etc/cdi")
VENDOR = "demo.kunlunxin.com"
KIND = f"{VENDOR}/xpu"
INSIDE = ("echo '--- nodes:'; ls -l /dev/xpu*; "
          "echo '--- write to /dev/xpu3 (ENXIO = cgroup allows it, no driver behind the fake node):'; "
          "(echo x > /dev/xpu3) 2>&1; "
          "echo '--- driver mount:'; grep ' /usr/local/xpu ' /proc/mounts; cat /usr/local/xpu/version; "
          "ls /usr/local/xpu/lib64; true")


class DemoFailed(Exception):
    pass


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def run(cmd: List[object]) -> subprocess.CompletedProcess:
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], text=True, capture_output=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise DemoFailed(f"command failed with exit {r.returncode}")
    return r


def terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does


class Demo:
    """What the demo made, so that cleanup() removes exactly that."""

    def __init__(self) -> None:
        # fake nodes must be openable: not on a nodev /tmp (a stock Debian 13 host's)
        self.work = Path(tempfile.mkdtemp(prefix="xpu-cdi-demo-", dir=devdirs.device_capable_base()))
        self.spec = ETC_CDI / f"{VENDOR}-xpu.json"
        self.made_etc_cdi = False
        self.podman: Optional[runtimes.Podman] = None

    def run(self) -> None:
        step("a simulated P800 host with 8 cards")
        host = fakehost.kunlunxin(self.work / "host", 8)
        print(f"fake host at {host.root}: /dev/xpu0..7 (c 240:0..7), /dev/xpuctrl (c 240:200), /usr/local/xpu")

        step(f"generate into {ETC_CDI}, validate, list")
        if not ETC_CDI.is_dir():
            ETC_CDI.mkdir(parents=True)
            self.made_etc_cdi = True
        run([BIN / "xpu-cdi", "generate", *host.cli_roots, "--vendor", VENDOR, "--output", self.spec])
        run([BIN / "xpu-cdi", "validate", self.spec])
        run([BIN / "xpu-cdi", "list", "--spec-dir", ETC_CDI])

        step(f"podman run --device {KIND}=3 (CDI: podman injects from the spec in {ETC_CDI})")
        # a private store and this machine's settings; the spec dirs are podman's own
        self.podman = runtimes.Podman(self.work / "podman", private_cdi=False)
        r = self.podman.run(["--device", f"{KIND}=3"], ["sh", "-c", INSIDE])
        print(r.stdout + r.stderr)
        if r.returncode != 0 or "No such device or address" not in r.stdout:
            raise DemoFailed("the container did not get card 3")

        step("runc + xpu-cdi-hook prestart, CXPU_VISIBLE_DEVICES=1,3 (runtimes without CDI)")
        specs = self.work / "cdi"
        run([BIN / "xpu-cdi", "generate", *host.cli_roots, "--spec-dir", specs])
        bundle = runtimes.Bundle(self.work)
        bundle.set_process(["sh", "-c", INSIDE.replace("xpu3", "xpu1")], env=["CXPU_VISIBLE_DEVICES=1,3"])
        log = self.work / "hook.log"
        bundle.add_hook("prestart", str(BIN / "xpu-cdi-hook"), ["xpu-cdi-hook", "prestart", "--log", str(log)],
                        env=[f"XPU_CDI_SPEC_DIRS={specs}"])
        r = runtimes.run_runc(bundle)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            raise DemoFailed("runc with the hook failed")
        print(f"--- the hook's log (one line per injection):\n{log.read_text()}")
        print("demo: done — both paths gave the container exactly the cards it asked for")

    def cleanup(self) -> None:
        self.spec.unlink(missing_ok=True)
        Path(str(self.spec) + ".xpu-cdi").unlink(missing_ok=True)  # generate's hook index
        if self.made_etc_cdi:
            try:
                ETC_CDI.rmdir()
            except OSError:  # something else wrote there meanwhile: not ours to remove
                pass
        if self.podman is not None:
            self.podman.close()
        fakehost.remove_tree(self.work)
        shutil.rmtree(self.work, ignore_errors=True)


def main() -> int:
    signal.signal(signal.SIGTERM, terminate)
    demo = Demo()
    try:
        demo.run()
        return 0
    except DemoFailed as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130
    finally:
        # a second Ctrl-C must not leave half of it behind
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        demo.cleanup()


if __name__ == "__main__":
    sys.exit(main())
