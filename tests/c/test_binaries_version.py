"""The binaries' --version: the package version from its one place (src/xpu_cdi/_version.py),
which build_bin.py reads and passes to the compiler; no number is written in the C sources."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from xpu_cdi._version import VERSION


def test_build_bin_reads_the_package_version(build_bin: Any) -> None:
    assert build_bin.version() == VERSION


def test_a_file_without_the_line_is_refused(build_bin: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "_version.py").write_text("VERSION = get()\n")
    monkeypatch.setattr(build_bin, "VERSION_FILE", tmp_path / "_version.py")
    with pytest.raises(ValueError, match="no VERSION"):
        build_bin.version()


def test_the_binaries_say_the_version_they_were_built_with(build_bin: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Another version in the file, another line from both binaries: the number comes from there."""
    (tmp_path / "_version.py").write_text('"""A release."""\n\nVERSION = "9.8.7rc1"\n')
    monkeypatch.setattr(build_bin, "VERSION_FILE", tmp_path / "_version.py")
    hook, wrapper = build_bin.build(str(tmp_path / "bin"), static=False)
    r = subprocess.run([hook, "--version"], capture_output=True, text=True, timeout=60, env={})
    assert (r.returncode, r.stdout) == (0, "xpu-cdi-hook, version 9.8.7rc1\n")
    r = subprocess.run([wrapper, "--version"], capture_output=True, text=True, timeout=60,
                       env={"XPU_CDI_RUNTIME": "/bin/true"})
    assert r.returncode == 0 and r.stdout.startswith("xpu-container-runtime, version 9.8.7rc1\n\n")
