"""Hostile images, racing: while the hook runs, a path of the image is flipped
between a real directory and a symlink to a host directory (atomically,
renameat2 RENAME_EXCHANGE, as fast as the kernel allows), the TOCTOU that
broke other injectors.  Whether each start succeeds or fails, asserted on
the host side: nothing appears in the host directory, no mount leaks into the
host's namespace, and in the container's own namespace (dumped by a second
prestart hook right after ours) every new mount point lies inside the rootfs."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Callable, List, Set

import pytest

from support import runtimes
from support.hookkit import HookHost, host_mounts, tree

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

RUNS = 6
RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
SHOW = ("(echo x > /dev/xpu1) 2>&1; cat /usr/local/xpu/version 2>&1; "
        "cat /etc/ld.so.conf.d/00-xpu-cdi.conf 2>&1; true")
# a prestart hook registered after ours: the container's mount table before pivot_root
DUMP = 'pid=$(sed -n "s/.*\\"pid\\": *\\([0-9][0-9]*\\).*/\\1/p"); cat /proc/$pid/mountinfo > "$1"'


def exchange(a: Path, b: Path) -> None:
    if _libc.renameat2(AT_FDCWD, str(a).encode(), AT_FDCWD, str(b).encode(), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class Flipper:
    """Swap *path* with a symlink beside it, in a loop, until stopped."""

    def __init__(self, path: Path, link_target: str) -> None:
        self.path, self.other = path, path.with_name(path.name + ".flip")
        os.symlink(link_target, self.other)
        self.stop = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            exchange(self.path, self.other)
            self.flips += 1

    def __enter__(self) -> "Flipper":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        if self.path.is_symlink():  # leave the image as it was made
            exchange(self.path, self.other)


def mount_points(path: Path) -> Set[str]:
    with open(path) as f:
        return {line.split()[4] for line in f}


def host_dir(base: Path) -> Path:
    d = base / "hostside" / "target"
    d.mkdir(parents=True)
    (d / "marker").write_text("host\n")
    return d


def absolute(target: Path) -> str:
    return str(target)


def climbing(target: Path) -> str:
    return "../" * 24 + str(target).lstrip("/")


@pytest.mark.parametrize("form", [absolute, climbing], ids=["absolute", "dotdot"])
@pytest.mark.parametrize("flipped", ["usr/local", "usr/local/xpu", "etc/ld.so.conf.d"])
def test_flip_while_injecting(xpu: HookHost, flipped: str, form: Callable[[Path], str]) -> None:
    """A path flipping between a dir and a link to the host never lets the hook create or mount outside the rootfs."""
    outside = host_dir(xpu.base)
    before_tree, before_mounts = tree(outside.parent), host_mounts(str(xpu.base))
    outcomes: List[str] = []
    seen_ours = False
    for run in range(RUNS):
        b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        ldconfig = b.rootfs / "sbin" / "ldconfig"  # so that the hook writes its ld.so.conf.d entry
        ldconfig.write_text("#!/bin/sh\nexit 0\n")
        ldconfig.chmod(0o755)
        (b.rootfs / "etc" / "ld.so.conf.d").mkdir(exist_ok=True)
        (b.rootfs / "usr" / "local" / "xpu").mkdir(exist_ok=True)
        dump = xpu.base / f"mounts-{run}"
        b.add_hook("prestart", "/bin/sh", ["sh", "-c", DUMP, "dump", str(dump)], env=["PATH=/usr/bin:/bin"])
        with Flipper(b.rootfs / flipped, form(outside)) as flipper:
            r = runtimes.run_runc(b)
        assert flipper.flips > 100, "the flipper did not run alongside the hook"
        err = [line for line in r.stderr.splitlines() if "xpu-cdi-hook" in line]
        if r.returncode == 0:
            outcomes.append("started")
        else:
            assert len(err) == 1, f"run {run}: a failed start must say why in one line:\n{r.stderr}"
            outcomes.append(err[0].split("xpu-cdi-hook: ", 1)[-1][:60])
        assert tree(outside.parent) == before_tree, f"run {run}: the host dir changed ({outcomes[-1]})"
        assert host_mounts(str(xpu.base)) == before_mounts, f"run {run}: a mount leaked to the host"
        if dump.exists():  # absent when our hook failed first: runc stops at the first failing hook
            new = mount_points(dump) - set(host_mounts("/"))
            # an escape lands where the flipped link points (under this test's base dir); mounts
            # elsewhere come and go with other tests running in parallel (podman's overlays)
            stray = sorted(m for m in new if (m + "/").startswith(str(xpu.base) + "/")
                           and not (m + "/").startswith(str(b.rootfs) + "/"))
            assert not stray, f"run {run}: mounts outside the rootfs in the container's namespace: {stray}"
            runc_own = tuple(f"{b.rootfs}/{d}" for d in ("proc", "dev", "sys"))
            seen_ours |= any(m.startswith(str(b.rootfs) + "/") and not m.startswith(runc_own) for m in new)
    assert len(outcomes) == RUNS, outcomes
    # the dump is not vacuous: when a start succeeded, our driver mount showed in it, inside the rootfs
    assert "started" not in outcomes or seen_ours, f"no dump showed the hook's own mount: {outcomes}"
