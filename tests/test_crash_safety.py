"""Crash safety of `xpu-cdi generate`: the real CLI process killed with SIGKILL
at random points (many runs, some timed to land inside the write itself)
leaves on disk the old spec or the new one, byte for byte, and temp files
that the next successful run removes."""

from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from support import fakehost
from xpu_cdi import atomic

pytestmark = pytest.mark.privileged  # mknod of the fake host's nodes

BIN = Path(sys.executable).parent
CARDS = 1024  # a ~600 KiB spec: the write and fsync take a few ms, long enough to be hit
RUNS = int(os.environ.get("XPU_CDI_CRASH_RUNS", "40"))
#: a loaded machine lands fewer kills inside the write's few milliseconds: the test goes on
#: until RUNS // 5 of them did (the event it needs), up to this many runs
MAX_RUNS = 10 * RUNS
SPEC = "kunlunxin.com-xpu.json"
# two different results, so that "old" and "new" can be told apart
VARIANTS: List[List[str]] = [[], ["--no-all-device"]]


def command(host: fakehost.FakeHost, spec_dir: Path, extra: List[str]) -> List[str]:
    return [str(BIN / "xpu-cdi"), "generate", *host.cli_roots, "--profile", "kunlunxin",
            "--spec-dir", str(spec_dir), *extra]


def temps(spec_dir: Path) -> Set[str]:
    return {n for n in os.listdir(spec_dir) if n.endswith(atomic.TMP_MARK)}


def wait_for_temp(spec_dir: Path, proc: "subprocess.Popen[bytes]", limit: float) -> bool:
    """Poll until *proc* has a temp file open in *spec_dir* (its write began)."""
    end = time.monotonic() + limit
    mark = f".{proc.pid}{atomic.TMP_MARK}"
    while time.monotonic() < end and proc.poll() is None:
        if any(n.endswith(mark) for n in os.listdir(spec_dir)):
            return True
    return False


def test_sigkill_leaves_old_or_new(tmp_path: Path, host_root: Path) -> None:
    """Every SIGKILL leaves a parseable spec and index equal to a complete old or new one; the next run cleans up."""
    host = fakehost.kunlunxin(host_root, cards=CARDS, sysfs=False)
    spec_dir = tmp_path / "cdi"
    refs: Dict[int, Tuple[bytes, bytes]] = {}
    t = time.perf_counter()
    for i, extra in enumerate(VARIANTS):
        subprocess.run(command(host, spec_dir, extra), check=True, stdout=subprocess.DEVNULL)
        refs[i] = ((spec_dir / SPEC).read_bytes(), (spec_dir / (SPEC + ".xpu-cdi")).read_bytes())
    full = (time.perf_counter() - t) / len(VARIANTS)
    assert refs[0][0] != refs[1][0] and refs[0][1] != refs[1][1]
    seed = int(os.environ.get("XPU_CDI_CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    mid_write = run = 0
    while run < RUNS or (mid_write < RUNS // 5 and run < MAX_RUNS):
        proc = subprocess.Popen(command(host, spec_dir, VARIANTS[run % 2]), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if run % 2:  # at a random point of the whole process life
                time.sleep(rng.uniform(0, full * 1.1))
            elif wait_for_temp(spec_dir, proc, full * 3):  # inside the write: temp file, fsync, rename
                if run % 4 == 2:  # somewhere in it; else at once, so that enough kills land inside
                    time.sleep(rng.uniform(0, 0.004))
        finally:
            proc.kill()
            proc.wait()
        where = f"run {run} (seed {seed}, XPU_CDI_CRASH_SEED to replay)"
        spec, index = (spec_dir / SPEC).read_bytes(), (spec_dir / (SPEC + ".xpu-cdi")).read_bytes()
        assert spec in (refs[0][0], refs[1][0]), f"{where}: the spec on disk is neither the old nor the new one"
        assert index in (refs[0][1], refs[1][1]), f"{where}: the hook index is neither the old nor the new one"
        assert stat.S_IMODE(os.stat(spec_dir / SPEC).st_mode) == 0o644, where
        left = temps(spec_dir)
        mid_write += any(f".{proc.pid}{atomic.TMP_MARK}" in n for n in left)
        # a killed writer leaves at most its two temp files (spec, index): nothing else appears
        assert set(os.listdir(spec_dir)) - left == {SPEC, SPEC + ".xpu-cdi"}, where
        run += 1
    assert mid_write >= RUNS // 5, f"only {mid_write} of {run} kills landed inside a write: the test is not biting"
    subprocess.run(command(host, spec_dir, []), check=True, stdout=subprocess.DEVNULL)
    assert temps(spec_dir) == set(), "temp files of killed runs survived the next successful run"
    assert (spec_dir / SPEC).read_bytes() == refs[0][0]
