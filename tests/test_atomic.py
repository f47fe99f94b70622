"""Atomic replacement of files that runtimes read concurrently."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from xpu_cdi import atomic


class TestWriteAtomic:
    def test_writes_with_mode_despite_umask(self, tmp_path: Path) -> None:
        """The file gets mode 0644 even under a restrictive umask."""
        old = os.umask(0o077)
        try:
            atomic.write_atomic(str(tmp_path / "a.json"), b"{}")
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(tmp_path / "a.json").st_mode) == 0o644
        assert (tmp_path / "a.json").read_bytes() == b"{}"

    def test_replaces_and_leaves_no_temp(self, tmp_path: Path) -> None:
        """A second write replaces the content; only the target remains."""
        p = tmp_path / "a.json"
        atomic.write_atomic(str(p), b"old")
        atomic.write_atomic(str(p), b"new")
        assert p.read_bytes() == b"new"
        assert sorted(os.listdir(tmp_path)) == ["a.json"]

    def test_temp_name_is_ignored_by_cdi(self, tmp_path: Path) -> None:
        """Temp files end neither in .json nor .yaml, so runtimes never read half a spec."""
        name = atomic.temp_name(str(tmp_path / "k.json"))
        assert not name.endswith((".json", ".yaml")) and os.path.dirname(name) == str(tmp_path)

    def test_failure_keeps_old_file(self, tmp_path: Path) -> None:
        """If writing fails, the old content stays and the temp file is removed."""
        p = tmp_path / "a.json"
        p.write_bytes(b"old")

        with pytest.raises(TypeError):
            atomic.write_atomic(str(p), 12345)  # type: ignore[arg-type]
        assert p.read_bytes() == b"old"
        assert sorted(os.listdir(tmp_path)) == ["a.json"]

    def test_stale_temp_of_dead_writer_removed(self, tmp_path: Path) -> None:
        """A temp file left by a killed writer disappears on the next successful write."""
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
        stale = tmp_path / f".a.json.{dead}{atomic.TMP_MARK}"
        stale.write_bytes(b"half")
        other = tmp_path / ".b.json.1.xpu-cdi-tmp"  # another file's temp: not ours to touch
        other.write_bytes(b"x")
        atomic.write_atomic(str(tmp_path / "a.json"), b"new")
        assert not stale.exists() and other.exists()
