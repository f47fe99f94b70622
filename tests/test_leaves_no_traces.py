"""The suite writes only into its own directories: a run of every hypothesis test (the
ones that build random trees, links included) leaves the machine's /, /etc and /tmp
top levels exactly as they were.  The run gets a fresh tmpfs on /tmp in a private
mount namespace, so that what other processes of the machine do in /tmp meanwhile
cannot blur the picture; / and /etc are the machine's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.privileged]

RUN = r"""
set -e
# the old /tmp stays reachable at /mnt, and what the run needs from it (the test's own
# dir, the checkout and its venv when they live under /tmp, as a CI clone may) is bound
# back at its path on the new /tmp
mount --bind /tmp /mnt
mount -t tmpfs -o mode=1777 tmpfs /tmp
for p in $KEEP; do
  case "$p" in /tmp/*) mkdir -p "$p"; mount --bind "/mnt${p#/tmp}" "$p" ;; esac
done
ls -A / > "$OUT/root.before"; ls -A /etc > "$OUT/etc.before"; ls -A /tmp > "$OUT/tmp.before"
set +e
"$@" > "$OUT/pytest.log" 2>&1
echo $? > "$OUT/rc"
ls -A / > "$OUT/root.after"; ls -A /etc > "$OUT/etc.after"; ls -A /tmp > "$OUT/tmp.after"
"""


def hypothesis_tests() -> list:
    out = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if path.name != Path(__file__).name and re.search(r"^from hypothesis|^import hypothesis",
                                                          path.read_text(), re.M):
            out.append(str(path))
    return out


def test_hypothesis_tests_leave_no_traces(tmp_path: Path) -> None:
    tests = hypothesis_tests()
    assert len(tests) >= 5, tests
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
           "--basetemp", str(tmp_path / "inner"), *tests]
    keep = " ".join(sorted({str(tmp_path), str(REPO), sys.prefix}, key=len))  # parents bound first
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", RUN, "run", *cmd],
                       cwd=REPO, env=dict(os.environ, OUT=str(out), KEEP=keep), capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stderr
    log = (out / "pytest.log").read_text()
    assert (out / "rc").read_text().strip() == "0", log[-3000:]
    for name in ("root", "etc", "tmp"):
        before = set((out / f"{name}.before").read_text().split())
        after = set((out / f"{name}.after").read_text().split())
        assert after == before, f"/{'' if name == 'root' else name}: new {sorted(after - before)}, " \
                                f"gone {sorted(before - after)}"
