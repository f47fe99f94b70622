"""Hostile and unusual images, extended: device nodes and mount targets that
already exist in the image as files, dirs, links or wrong nodes; a read-only
rootfs; images without /dev, without ldconfig, without /etc.  Each start
either gives the container exactly its cards or fails with one clear line,
and the host (asserted on the host side) is never touched."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Optional

import pytest

from support import runtimes
from support.runtimes import ENXIO
from support.hookkit import HookHost, container_output, host_mounts, tree

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

SHOW = ("stat -c '%n %F %t:%T' /dev/xpu1 /dev/xpuctrl 2>&1; (echo x > /dev/xpu1) 2>&1; "
        "cat /usr/local/xpu/version 2>&1; touch /usr/local/xpu/probe 2>&1; touch /probe 2>&1; true")


def no_dev_tmpfs(b: "runtimes.Bundle") -> None:
    """Use the image's own /dev (runc mounts no tmpfs over it)."""
    b.config["mounts"] = [m for m in b.config["mounts"] if not m["destination"].startswith("/dev")]


def start(xpu: HookHost, b: "runtimes.Bundle", watched: Optional[Path] = None):  # type: ignore[no-untyped-def]
    """Run the bundle; assert the host side is untouched; return (ok, output, the hook's error line)."""
    before_tree = tree(watched) if watched else []
    before_mounts = host_mounts(str(xpu.base))
    r = runtimes.run_runc(b)
    assert host_mounts(str(xpu.base)) == before_mounts, "a mount leaked to the host"
    if watched:
        assert tree(watched) == before_tree, "the host dir the image points at changed"
    hook_lines = [line for line in r.stderr.splitlines() if "xpu-cdi-hook: " in line]
    if r.returncode != 0:
        assert len(hook_lines) == 1, f"a refused start must say why in one line: {container_output(r)}"
        assert "RAN" not in r.stdout
    return r.returncode == 0, r.stdout + r.stderr, hook_lines[0] if hook_lines else ""


def started_with_card1(ok: bool, out: str) -> None:
    assert ok, out
    assert "/dev/xpu1 character special file f0:1" in out and ENXIO in out, out
    assert "version:5.0.21" in out and "touch: /usr/local/xpu/probe: Read-only file system" in out, out


def host_file(base: Path) -> Path:
    d = base / "hostside"
    d.mkdir(exist_ok=True)
    f = d / "secret"
    f.write_text("host\n")
    return f


class TestExistingDeviceNodes:
    @pytest.mark.parametrize("make, refused", [
        (lambda p, host: p.write_text("image file\n"), True),
        (lambda p, host: p.mkdir(), True),
        (lambda p, host: os.symlink(str(host), p), True),
        (lambda p, host: os.symlink("../" * 24 + str(host).lstrip("/"), p), True),
        (lambda p, host: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3)), True),
        (lambda p, host: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(240, 1)), False),
    ], ids=["file", "dir", "link-absolute", "link-dotdot", "wrong-numbers", "right-node"])
    def test_node_already_in_image(self, xpu: HookHost, make: Callable[[Path, Path], None], refused: bool) -> None:
        """/dev/xpu1 already in the image: refused unless it is the very node; never written through."""
        secret = host_file(xpu.base)
        b = xpu.bundle(["sh", "-c", "echo RAN; " + SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        no_dev_tmpfs(b)
        make(b.rootfs / "dev" / "xpu1", secret)
        ok, out, err = start(xpu, b, secret.parent)
        if refused:
            assert not ok and "/dev/xpu1" in err and "already exists" in err, out
        else:
            started_with_card1(ok, out)
        assert secret.read_text() == "host\n"


class TestExistingMountTargets:
    def test_target_is_a_file(self, xpu: HookHost) -> None:
        """/usr/local/xpu is a regular file in the image: refused (the source is a directory)."""
        b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
        (b.rootfs / "usr" / "local" / "xpu").write_text("image file\n")
        ok, out, err = start(xpu, b)
        assert not ok and "'/usr/local/xpu'" in err and "not a directory" in err, out

    def test_file_target_is_a_dir(self, xpu: HookHost) -> None:
        """/usr/local/bin/xpu-smi (a file mount) is a directory in the image: refused."""
        b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
        (b.rootfs / "usr" / "local" / "bin" / "xpu-smi").mkdir(parents=True)
        ok, out, err = start(xpu, b)
        assert not ok and "xpu-smi" in err and "not a file" in err, out

    def test_target_dir_with_content(self, xpu: HookHost) -> None:
        """/usr/local/xpu with the image's own files: mounted over read-only, the image's files hidden."""
        b = xpu.bundle(["sh", "-c", SHOW + "; ls /usr/local/xpu"], env=["CXPU_VISIBLE_DEVICES=1"])
        (b.rootfs / "usr" / "local" / "xpu").mkdir()
        (b.rootfs / "usr" / "local" / "xpu" / "image-only").write_text("x\n")
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert "image-only" not in out

    def test_target_relative_link_in_image(self, xpu: HookHost) -> None:
        """/usr/local/xpu -> ../../opt/xpu (inside the image): the mount lands on /opt/xpu in the rootfs."""
        b = xpu.bundle(["sh", "-c", SHOW + "; grep -c ' /opt/xpu ' /proc/self/mountinfo"],
                       env=["CXPU_VISIBLE_DEVICES=1"])
        (b.rootfs / "opt" / "xpu").mkdir(parents=True)
        os.symlink("../../opt/xpu", b.rootfs / "usr" / "local" / "xpu")
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert out.rstrip().endswith("1"), out

    def test_target_dangling_absolute_link(self, xpu: HookHost) -> None:
        """/usr/local/xpu -> /<a path absent on the host>: created inside the rootfs, never on the host."""
        absent = xpu.base / "never-on-host"
        b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        os.symlink(str(absent), b.rootfs / "usr" / "local" / "xpu")
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert not absent.exists(), "the hook followed the image's link onto the host"
        assert (b.rootfs / str(absent).lstrip("/")).is_dir()


class TestUnusualImages:
    def test_readonly_rootfs(self, xpu: HookHost) -> None:
        """root.readonly: the cards and the driver mount are there, the rootfs stays read-only."""
        b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        b.config["root"]["readonly"] = True
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert "touch: /probe: Read-only file system" in out

    def test_readonly_rootfs_missing_mount_point(self, xpu: HookHost) -> None:
        """root.readonly and no /usr/local in the image: the hook makes the mount point before runc seals the root."""
        b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        b.config["root"]["readonly"] = True
        shutil.rmtree(b.rootfs / "usr" / "local")
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)

    @pytest.mark.parametrize("tmpfs", [True, False], ids=["dev-tmpfs", "no-dev-mount"])
    def test_no_dev(self, xpu: HookHost, tmpfs: bool) -> None:
        """An image without /dev (with and without runc's /dev tmpfs): the nodes are made, allowed by the cgroup."""
        b = xpu.bundle(["sh", "-c", SHOW], env=["CXPU_VISIBLE_DEVICES=1"])
        shutil.rmtree(b.rootfs / "dev")
        if not tmpfs:
            no_dev_tmpfs(b)
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert "/dev/xpuctrl character special file f0:c8" in out

    def test_no_ldconfig(self, xpu: HookHost) -> None:
        """busybox has no ldconfig: the start succeeds and the log says the ld cache was left alone."""
        b = xpu.bundle(["sh", "-c", SHOW + "; ls /etc/ld.so.conf.d 2>&1; true"], env=["CXPU_VISIBLE_DEVICES=1"])
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert "no ldconfig in the image" in xpu.log_text()
        assert not (b.rootfs / "etc" / "ld.so.conf.d" / "00-xpu-cdi.conf").exists()

    @pytest.mark.parametrize("ldconfig", [False, True], ids=["no-ldconfig", "ldconfig"])
    def test_no_etc(self, xpu: HookHost, ldconfig: bool) -> None:
        """An image without /etc: starts; with an ldconfig the conf entry is made inside the rootfs."""
        b = xpu.bundle(["sh", "-c", SHOW + "; cat /etc/ld.so.conf.d/00-xpu-cdi.conf 2>&1; true"],
                       env=["CXPU_VISIBLE_DEVICES=1"])
        shutil.rmtree(b.rootfs / "etc")
        if ldconfig:
            fake = b.rootfs / "sbin" / "ldconfig"
            fake.write_text("#!/bin/sh\nexit 0\n")
            fake.chmod(0o755)
        ok, out, _ = start(xpu, b)
        started_with_card1(ok, out)
        assert ("/usr/local/xpu/lib64" in out) == ldconfig, out
