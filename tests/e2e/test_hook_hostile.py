"""Hostile images: /usr/local, the mount target, /dev or ld.so.conf.d are
symlinks to host paths (absolute, or ../../.. climbing out).  The hook
resolves every path inside the rootfs: nothing may be created or mounted
outside it.  Asserted on the host side."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from support import runtimes
from support.hookkit import HookHost, container_output, host_mounts, tree

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

SHOW = ("cat /usr/local/xpu/version; grep -F ' /usr/local/xpu ' /proc/self/mountinfo | sed 's/^/M /'; "
        "touch /usr/local/xpu/probe 2>&1 | sed 's/^/T /'; (echo x > /dev/xpu1) 2>&1; true")


def host_dir(base: Path, name: str) -> Path:
    """A directory on the host with a marker file: what the image points at."""
    d = base / "hostside" / name
    d.mkdir(parents=True)
    (d / "marker").write_text("host\n")
    return d


def absolute(target: Path) -> str:
    return str(target)


def climbing(target: Path) -> str:
    return "../" * 24 + str(target).lstrip("/")


FORMS = [pytest.param(absolute, id="absolute"), pytest.param(climbing, id="dotdot")]


# runc 1.1.5 itself (no hook involved) makes its /dev symlinks through an
# image's /dev symlink, on the host: tolerated here, and only these.
RUNC_DEV_LINKS = {"fd", "ptmx", "stdin", "stdout", "stderr"}


def run_and_check(xpu: HookHost, b: "runtimes.Bundle", watched: Path) -> str:
    before_tree, before_mounts = tree(watched), host_mounts(str(xpu.base))
    r = runtimes.run_runc(b)
    out = r.stdout + r.stderr
    added = set(tree(watched)) - set(before_tree)
    assert set(before_tree) <= set(tree(watched)), "a host file the image pointed at was removed"
    assert all(e.split()[0].split("/")[-1] in RUNC_DEV_LINKS and e.split()[1] == "0o120777" for e in added), \
        f"the hook created {sorted(added)} in a host directory the image pointed at"
    assert host_mounts(str(xpu.base)) == before_mounts, "a mount leaked into the host's namespace"
    assert r.returncode == 0, container_output(r)
    return out


@pytest.mark.parametrize("form", FORMS)
def test_usr_local_symlink(xpu: HookHost, form: Callable[[Path], str]) -> None:
    """/usr/local -> host dir: the driver dir is mounted at the in-root place the link names."""
    outside = host_dir(xpu.base, "usrlocal")
    b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
    (b.rootfs / "usr" / "local").rmdir()
    os.symlink(form(outside), b.rootfs / "usr" / "local")
    out = run_and_check(xpu, b, outside.parent)
    assert "version:5.0.21" in out and "T touch: /usr/local/xpu/probe: Read-only file system" in out
    # the mount point was made inside the rootfs, where the link resolves in-root
    assert (b.rootfs / str(outside).lstrip("/") / "xpu").is_dir()


@pytest.mark.parametrize("form", FORMS)
def test_mount_target_symlink(xpu: HookHost, form: Callable[[Path], str]) -> None:
    """/usr/local/xpu itself -> a host dir: nothing is mounted over the host dir."""
    outside = host_dir(xpu.base, "target")
    b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
    os.symlink(form(outside), b.rootfs / "usr" / "local" / "xpu")
    out = run_and_check(xpu, b, outside.parent)
    assert "version:5.0.21" in out


@pytest.mark.parametrize("form", FORMS)
def test_dev_symlink(xpu: HookHost, form: Callable[[Path], str]) -> None:
    """/dev -> a host dir, and no /dev tmpfs: device nodes are made inside the rootfs only."""
    outside = host_dir(xpu.base, "dev")
    b = xpu.bundle(["sh", "-c", "ls -l /dev/xpu1 && (echo x > /dev/xpu1) 2>&1; true"], env=["CXPU_VISIBLE_DEVICES=1"])
    b.config["mounts"] = [m for m in b.config["mounts"] if not m["destination"].startswith("/dev")]
    (b.rootfs / "dev").rmdir()
    os.symlink(form(outside), b.rootfs / "dev")
    out = run_and_check(xpu, b, outside.parent)
    assert "No such device or address" in out
    inside = b.rootfs / str(outside).lstrip("/") / "xpu1"
    assert inside.is_char_device() and os.major(inside.stat().st_rdev) == 240


@pytest.mark.parametrize("form", FORMS)
def test_ld_so_conf_d_symlink(xpu: HookHost, form: Callable[[Path], str]) -> None:
    """/etc/ld.so.conf.d -> a host dir: the conf entry is written inside the rootfs."""
    outside = host_dir(xpu.base, "ldsoconfd")
    b = xpu.bundle(["sh", "-c", "cat /etc/ld.so.conf.d/00-xpu-cdi.conf"], env=["CXPU_VISIBLE_DEVICES=1"])
    fake = b.rootfs / "sbin" / "ldconfig"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    os.symlink(form(outside), b.rootfs / "etc" / "ld.so.conf.d")
    out = run_and_check(xpu, b, outside.parent)
    assert "/usr/local/xpu/lib64" in out
    assert (b.rootfs / str(outside).lstrip("/") / "00-xpu-cdi.conf").is_file()


def test_symlink_loop_fails_cleanly(xpu: HookHost) -> None:
    """/usr/local a link loop: the hook fails with ELOOP, the container does not start, nothing leaks."""
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
    (b.rootfs / "usr" / "local").rmdir()
    os.symlink("/usr/loop", b.rootfs / "usr" / "local")
    os.symlink("/usr/local", b.rootfs / "usr" / "loop")
    before = host_mounts(str(xpu.base))
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "Too many levels of symbolic links" in r.stderr, container_output(r)
    assert host_mounts(str(xpu.base)) == before
