"""Every Debian package a test, build or image step needs is installed by `make deps`, before
the first test; the suite itself never runs apt (scripts/install-deps.sh under
support.DEPS_CHECK only checks, and fails naming what is missing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import DEPS_CHECK, coldrun

REPO = Path(__file__).resolve().parent.parent
INSTALL_DEPS = REPO / "scripts" / "install-deps.sh"


def test_make_deps_leaves_nothing_to_install() -> None:
    """After `make deps`, each of its install steps (the suite's, the runtime matrix's, the cross
    toolchain, the .deb and .rpm build dependencies) finds everything: run again checking only."""
    r = subprocess.run(["make", "-s", "--no-print-directory", "deps"], cwd=REPO, capture_output=True,
                       text=True, env=dict(os.environ, **DEPS_CHECK), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "install-deps: missing" not in r.stderr


@pytest.fixture
def recording_apt(tmp_path: Path) -> Path:
    """A PATH directory whose apt-get and dpkg only record that they ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("apt-get", "dpkg"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/ran\n')
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def test_an_install_step_in_the_suite_only_checks(recording_apt: Path) -> None:
    """A step a test reaches with something missing fails with one line naming it and runs no apt:
    the run's environment carries the check (tests/conftest.py), nothing the test adds."""
    assert os.environ.get("XPU_CDI_DEPS_CHECK") == "1"
    env = dict(os.environ, PATH=f"{recording_apt}:{os.environ['PATH']}")
    r = subprocess.run(["sh", str(INSTALL_DEPS), "xpu-cdi-no-such-package"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["install-deps: missing Debian packages: xpu-cdi-no-such-package "
                                     "(`make deps` installs them; the test suite never installs packages itself)"]
    assert not (recording_apt.parent / "ran").exists()


def test_without_the_check_it_would_install(recording_apt: Path) -> None:
    """The same step outside the suite goes on to apt (here the recorder): the check is what stops it."""
    env = {k: v for k, v in os.environ.items() if k != "XPU_CDI_DEPS_CHECK"}
    env["PATH"] = f"{recording_apt}:{os.environ['PATH']}"
    r = subprocess.run(["sh", str(INSTALL_DEPS), "xpu-cdi-no-such-package"], capture_output=True, text=True,
                       env=env, timeout=60)
    ran = (recording_apt.parent / "ran").read_text().splitlines() if (recording_apt.parent / "ran").exists() else []
    if os.geteuid() != 0:
        assert r.returncode == 1 and "run as root" in r.stderr
        return
    # the command line a cold run (scripts/cold-run.py) finds in apt's history
    assert f"{coldrun.INSTALL_DEPS_APT} xpu-cdi-no-such-package" in ran, (ran, r.stderr)
