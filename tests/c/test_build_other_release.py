"""The two binaries build, warning-free, with the other Debian release's compiler and
headers, and run there: a CI machine may be Debian 12 or 13, and a header one release
pulls in through another (Debian 13's glibc 2.41 no longer gives <fcntl.h> through
<sys/mount.h>) must not break the other's build.  The compile-and-link command is
build_bin.command's, run inside the release tree of tests/support/releasetree.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from support import releasetree

pytestmark = [pytest.mark.privileged]


def test_binaries_build_and_run_in_the_other_release(build_bin: Any, tmp_path: Path) -> None:
    release = releasetree.other_release()
    if release is None:
        pytest.skip(f"host release {releasetree.host_release() or 'unknown'!r} is not Debian 12 or 13")
    if os.geteuid() != 0:
        pytest.skip("building and entering a release tree needs root (debootstrap, mount namespaces)")
    tree = releasetree.Tree(release, releasetree.ensure_tree(release), binds=[tmp_path])
    bb = build_bin
    for name in bb.TARGETS:
        out = tmp_path / name
        r = tree.run(bb.command(name, str(out), ["-Werror"]), timeout=300)
        assert r.returncode == 0 and r.stderr == "", f"{name} on {release}:\n{r.stderr}"
    r = tree.run([str(tmp_path / "xpu-cdi-hook"), "--help"])
    assert r.returncode == 0 and r.stdout.startswith("usage: xpu-cdi-hook"), r
    r = tree.run([str(tmp_path / "xpu-container-runtime"), "--version"], env=["XPU_CDI_RUNTIME=/bin/true"])
    assert r.returncode == 0 and r.stderr == "", r
