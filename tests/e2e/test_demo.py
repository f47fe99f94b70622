"""`make demo` (scripts/demo.py), the README's first command, end to end: it passes with the
real podman and runc, and it removes everything it made when it succeeds, when podman fails
and when it is interrupted (Ctrl-C, SIGTERM).

The demo writes its spec to /etc/cdi as a user's run does.  Here each run gets /etc/cdi of its
own (runtimes.private_etc_cdi: a private mount namespace with a test dir bound there), so the
machine's /etc/cdi never changes while other tests run, and what the demo leaves in /etc/cdi
is exactly what the test dir holds afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from support import devdirs
from support.runtimes import private_etc_cdi

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "demo.py"


class Run:
    """The demo's private /etc/cdi, temp dir and PATH."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.etc_cdi = base / "etc-cdi"
        self.tmp = base / "tmp"  # the demo's TMPDIR: what it leaves in the temp dir shows here
        self.bin = base / "bin"
        for d in (self.etc_cdi, self.tmp, self.bin):
            d.mkdir()
        self.env: Dict[str, str] = dict(os.environ, TMPDIR=str(self.tmp))

    def command(self) -> list:
        """The demo as a terminal starts it: with Ctrl-C at its default.  pytest may run with SIGINT
        ignored (a background job of a script without job control, as some CI runners start it), and
        an ignored signal stays ignored through every fork and exec: Python then never raises
        KeyboardInterrupt, and the demo's podman would sleep on through the test's Ctrl-C."""
        return ["env", "--default-signal=INT", *private_etc_cdi(self.etc_cdi, self.base, [sys.executable, str(DEMO)])]

    def fake_podman(self, script: str) -> None:
        """A `podman` first on the demo's PATH running *script* (sh, "$1" the subcommand)."""
        (self.bin / "podman").write_text(f"#!/bin/sh\n{script}\n")
        (self.bin / "podman").chmod(0o755)
        self.env["PATH"] = f"{self.bin}:{os.environ['PATH']}"

    def leftovers(self) -> list:
        return sorted(str(p.relative_to(self.base)) for d in (self.etc_cdi, self.tmp) for p in d.iterdir())


@pytest.fixture
def run() -> Iterator[Run]:
    # short: the demo's podman store lives under TMPDIR (podman 4.3 stalls on long store paths)
    base = Path(tempfile.mkdtemp(prefix="xd-", dir=devdirs.device_capable_base()))
    yield Run(base)
    subprocess.run(["rm", "-rf", "--one-file-system", str(base)], capture_output=True)


def test_demo_passes_and_leaves_nothing(run: Run) -> None:
    r = subprocess.run(run.command(), env=run.env, capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    # what each path showed: the CDI container wrote to card 3 and got ENXIO (cgroup allowed),
    # the hook's container saw cards 1 and 3 only
    assert "demo.kunlunxin.com/xpu=3" in out and "No such device or address" in out
    assert "/dev/xpu1" in out and "/dev/xpu3" in out.split("runc + xpu-cdi-hook")[1]
    assert "/dev/xpu0" not in out.split("runc + xpu-cdi-hook")[1]
    assert "demo: done" in out
    assert run.leftovers() == []


def test_podman_failure_fails_the_demo_and_cleans_up(run: Run) -> None:
    run.fake_podman('[ "$1" = run ] && { echo "Error: setting up CDI devices: simulated" >&2; exit 126; }\nexit 0')
    r = subprocess.run(run.command(), env=run.env, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "demo: the container did not get card 3" in r.stderr
    assert run.leftovers() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_demo_cleans_up(run: Run, sig: int) -> None:
    """Interrupted while its container runs (a podman that blocks in `run`, so the moment is
    certain): the demo exits 130 and its spec, store and fake host are gone."""
    running = run.base / "podman-running"
    run.fake_podman(f'[ "$1" = run ] && {{ touch {running}; exec sleep 600; }}\nexit 0')
    proc = subprocess.Popen(run.command(), env=run.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # bounds a hang: the steps before it take CPU
        while not running.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the demo never reached podman run"
            time.sleep(0.05)
        assert (run.etc_cdi / "demo.kunlunxin.com-xpu.json").is_file()  # it was there to remove
        # Ctrl-C reaches the terminal's whole foreground group; SIGTERM (kill) the demo alone
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "demo: interrupted" in err
    assert run.leftovers() == []
