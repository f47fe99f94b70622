"""packaging/image/build.py: its buildah calls, with a stand-in buildah on PATH that records its argv
and fails where asked (a failed build leaves no working container behind: the base's is removed, bud
removes a failed step's); and how it runs another architecture's programs (foreign(), emulate())."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List

import pytest

from support import imagebuild

STUB = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
case " $* " in
  *" images "*) exit 0 ;;
  *" from "*) echo working-ctr; exit 0 ;;
  *" {fail} "*) echo "stand-in buildah: {fail} fails" >&2; exit 1 ;;
esac
exit 0
"""


def run_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str) -> List[str]:
    """build.build() with the stand-in failing at buildah *fail*: the calls it made (after the storage args)."""
    b = imagebuild.builder()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls"
    (bindir / "buildah").write_text(STUB.format(log=log, fail=fail))
    (bindir / "buildah").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("XPU_CDI_IMAGE_STORAGE_DRIVER", "vfs")
    base = tmp_path / "work" / "base-bookworm-000000000000.tar"
    base.parent.mkdir()
    base.write_bytes(b"")
    monkeypatch.setattr(b, "make_base", lambda work, mirror, logf, target: base)
    monkeypatch.setattr(b, "make_context", lambda dest, repo: dest.mkdir(parents=True))
    with pytest.raises(RuntimeError, match="buildah failed"):
        b.build(tmp_path / "out.tar", tmp_path / "work")
    return [ln.split(" vfs ", 1)[1] for ln in log.read_text().splitlines()]


def test_failed_base_commit_removes_its_working_container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = run_build(tmp_path, monkeypatch, "add")
    assert calls[-1] == "rm working-ctr", calls
    assert not [c for c in calls if c.startswith("bud")]


def test_failed_bud_removes_its_working_containers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = run_build(tmp_path, monkeypatch, "bud")
    (bud,) = [c for c in calls if c.startswith("bud ")]
    assert "--force-rm" in bud.split()
    assert "rm working-ctr" in calls  # the base's, committed before bud ran


def test_foreign_runs_an_arm64_program_and_leaves_the_system_as_it_was(tmp_path: Path) -> None:
    """An aarch64 program (Debian's cross compiler, static) run through foreign(): it runs and its exit
    status comes back; the system's binfmt_misc handlers are the same after as before (a handler of the
    build's own user namespace, when the system has none), and an unknown command fails in one line."""
    b = imagebuild.builder()
    src = tmp_path / "answer.c"
    src.write_text("int main(void) { return 42; }\n")
    prog = tmp_path / "answer"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-o", str(prog), str(src)], check=True)
    handlers = Path("/proc/sys/fs/binfmt_misc")
    before = sorted(p.name for p in handlers.iterdir())
    assert subprocess.run(b.foreign([str(prog)], "arm64"), timeout=120).returncode == 42
    assert sorted(p.name for p in handlers.iterdir()) == before
    if not b.system_runs("arm64"):
        r = subprocess.run(b.foreign(["/nonexistent"], "arm64"), capture_output=True, text=True, timeout=120)
        assert r.returncode == 125 and r.stderr.startswith("image: /nonexistent: "), r.stderr
