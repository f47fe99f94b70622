"""resolver.spawn_confined (C) and its Python twin: chroot, exact env, no
capabilities, output capture, exec errors and the timeout."""

from __future__ import annotations

import os
import tarfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import runtimes
from xpu_cdi import _pyresolver, resolver
from xpu_cdi.errors import SyscallError

pytestmark = pytest.mark.privileged
ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
SPAWNERS = [pytest.param(resolver.spawn_confined, id="c"), pytest.param(_pyresolver.spawn_confined, id="python")]


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A busybox rootfs to chroot into."""
    d = tmp_path_factory.mktemp("spawn-root")
    with tarfile.open(runtimes.cached_rootfs_tar()) as t:
        t.extractall(d)
    yield d


@pytest.mark.parametrize("spawn", SPAWNERS)
class TestSpawn:
    def test_chroot_and_env(self, spawn: Callable, rootfs: Path) -> None:  # type: ignore[type-arg]
        """The child sees the rootfs as / and exactly the given environment."""
        (rootfs / "marker-in-root").write_text("")
        status, out = spawn(str(rootfs), ["/bin/sh", "-c", "ls /; echo ENV; env"], ENV)
        assert os.waitstatus_to_exitcode(status) == 0
        listing, _, env = out.partition("ENV\n")
        assert "marker-in-root" in listing.split()
        assert {line.split("=")[0] for line in env.split()} <= {"PATH", "PWD", "SHLVL"}  # sh adds PWD/SHLVL
        assert "PATH=/usr/sbin:/usr/bin:/sbin:/bin" in env

    def test_no_capabilities(self, spawn: Callable, rootfs: Path) -> None:  # type: ignore[type-arg]
        """uid 0 but no capabilities: mknod and chown are refused."""
        status, out = spawn(str(rootfs), ["/bin/sh", "-c", "mknod /n c 1 3; chown 1 /etc/passwd; id -u"], ENV)
        assert out.count("Operation not permitted") == 2, out
        assert out.strip().endswith("0")
        assert not (rootfs / "n").exists()

    def test_exit_status_and_truncation(self, spawn: Callable, rootfs: Path) -> None:  # type: ignore[type-arg]
        """The status is returned; output beyond 4 KiB is read and dropped."""
        status, out = spawn(str(rootfs), ["/bin/sh", "-c", "yes abcdefgh | head -c 100000; exit 3"], ENV)
        assert os.waitstatus_to_exitcode(status) == 3
        assert 4000 <= len(out) < 4096 and out.startswith("abcdefgh")

    def test_missing_program(self, spawn: Callable, rootfs: Path) -> None:  # type: ignore[type-arg]
        """A program that does not exist in the root: ENOENT from exec, named."""
        with pytest.raises(SyscallError) as info:
            spawn(str(rootfs), ["/sbin/nothing-here"], ENV)
        assert info.value.errno == 2 and info.value.call == "exec"

    def test_timeout(self, spawn: Callable, rootfs: Path) -> None:  # type: ignore[type-arg]
        """A program that hangs is killed after the timeout (ETIMEDOUT)."""
        t = time.monotonic()
        with pytest.raises(SyscallError) as info:
            spawn(str(rootfs), ["/bin/sleep", "30"], ENV, (), 0.5)
        assert info.value.errno == 110 and time.monotonic() - t < 10
