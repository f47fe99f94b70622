"""The other Debian release's tree (tests/support/releasetree.py): built by the suite, entered
with pivot_root, holding that release's runtimes, starting nothing by itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import devdirs
from support import releasetree

pytestmark = [pytest.mark.privileged, pytest.mark.runtime]
# the release lines the matrix is about: (runtime, --version) -> major.minor per release
LINES = {
    "bookworm": {"runc": "1.1", "crun": "1.8", "podman": "4.3", "containerd": "1.6", "dockerd": "20.10"},
    "trixie": {"runc": "1.1", "crun": "1.21", "podman": "5.4", "containerd": "1.7", "dockerd": "26.1"},
}


def test_tree_is_the_other_release(other_tree: Path) -> None:  # noqa: F811
    release = releasetree.other_release()
    tree = releasetree.Tree(release, other_tree)
    r = tree.run(["sh", "-c", ". /etc/os-release; echo $VERSION_CODENAME; cat /usr/sbin/policy-rc.d"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == release
    assert "exit 101" in r.stdout  # no service of the tree ever starts by itself
    for tool, want in LINES[release].items():
        line = tree.version([tool, "--version"])
        assert re.search(rf"\b{re.escape(want)}(\.\d+|\b)", line), f"{tool}: {line!r}, want {want}.x"


def test_entered_with_pivot_root(other_tree: Path, tmp_path: Path) -> None:  # noqa: F811
    """The namespace's root is the tree itself (pivot_root, not chroot: a process that
    setns()es into another mount namespace and back lands on the tree again), the host's
    old root is gone, and the test's own directory is bound in."""
    (tmp_path / "mark").write_text("bound\n")
    tree = releasetree.Tree(releasetree.other_release(), other_tree, [tmp_path])
    script = (f"cat {tmp_path}/mark; ls /.oldroot | wc -l; "
              "nsenter --mount=/proc/self/ns/mnt -- cat /etc/debian_version; "
              "awk '$5 == \"/\" {print $4}' /proc/self/mountinfo")
    r = tree.run(["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "bound" and lines[1] == "0", r.stdout
    assert lines[2].split(".")[0] == releasetree.VERSION_OF[releasetree.other_release()], r.stdout
    assert lines[3] == str(other_tree), r.stdout  # the mount at / is the tree directory


def test_tree_on_a_filesystem_with_device_nodes(other_tree: Path) -> None:  # noqa: F811
    assert devdirs.allows_device_nodes(other_tree)
