"""Finding the container's device cgroup, and writing its rules."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from xpu_cdi.errors import HookError
from xpu_cdi.hook import cgroup
from xpu_cdi.hook.rootfs import Undo

HYBRID = """\
25 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
26 25 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
27 26 0:24 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
30 26 0:27 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
31 26 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
"""
UNIFIED = "27 1 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
NESTED = "30 26 0:27 /kubepods/pod1 /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n"
ESCAPED = "30 26 0:27 / /mnt/cg\\040devices rw - cgroup cgroup rw,devices\n"
PROC = "5:devices:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n1:name=systemd:/x\n0::/kubepods/pod1/c1\n"


class TestLocate:
    def test_hybrid_uses_v1_devices(self) -> None:
        """Hybrid layout (this machine): the v1 devices controller, as runc does."""
        assert cgroup.locate(HYBRID, PROC) == (1, "/sys/fs/cgroup/devices/kubepods/pod1/c1")

    def test_unified(self) -> None:
        """cgroup2 on /sys/fs/cgroup: v2 with the 0:: path."""
        assert cgroup.locate(UNIFIED, PROC) == (2, "/sys/fs/cgroup/kubepods/pod1/c1")

    def test_nested_mount_root(self) -> None:
        """A mount that shows the hierarchy from a sub-tree (inside a container): path made relative."""
        assert cgroup.locate(NESTED, PROC) == (1, "/sys/fs/cgroup/devices/c1")

    def test_escaped_mountpoint(self) -> None:
        """mountinfo's octal escapes are decoded."""
        assert cgroup.locate(ESCAPED, PROC) == (1, "/mnt/cg devices/kubepods/pod1/c1")

    def test_only_unified_elsewhere(self) -> None:
        """No v1 devices controller: the only cgroup2 mount is used."""
        assert cgroup.locate(HYBRID.replace("rw,devices", "rw,cpu"), PROC)[0] == 2

    @pytest.mark.parametrize("mounts, proc, needle", [
        ("", PROC, "no cgroup device controller"),
        (HYBRID, "0::/x\n", "no cgroup v1 devices group"),
        (UNIFIED, "5:devices:/x\n", "no cgroup v2 group"),
    ])
    def test_errors(self, mounts: str, proc: str, needle: str) -> None:
        """Missing controller or membership: a clear error."""
        with pytest.raises(HookError, match=needle):
            cgroup.locate(mounts, proc)


class TestRules:
    @pytest.mark.parametrize("node, want", [
        ({"path": "/dev/x", "type": "c", "major": 240, "minor": 1}, ("c", 240, 1, "rwm")),
        ({"path": "/dev/x", "type": "b", "major": 8, "minor": 0, "permissions": "wr"}, ("b", 8, 0, "rw")),
        ({"path": "/dev/x", "type": "u", "major": 240, "minor": 2, "permissions": "m"}, ("c", 240, 2, "m")),
        ({"path": "/dev/x", "type": "p", "major": 0, "minor": 0}, None),
    ])
    def test_rule_of(self, node: dict, want: object) -> None:
        """Type u is a char device, fifos need no rule, permissions are normalised to rwm order."""
        assert cgroup.rule_of(node) == want

    @pytest.mark.parametrize("node, needle", [
        ({"path": "/dev/x", "type": "z", "major": 1, "minor": 1}, "type 'z'"),
        ({"path": "/dev/x", "type": "c", "major": 1, "minor": 1, "permissions": "rwx"}, "permissions 'rwx'"),
    ])
    def test_bad(self, node: dict, needle: str) -> None:
        """Bad types and permissions are refused by name."""
        with pytest.raises(HookError, match=needle):
            cgroup.rule_of(node)


@pytest.fixture
def v1_devices() -> Iterator[Path]:
    """A fresh v1 devices cgroup that denies everything; removed afterwards."""
    base = Path("/sys/fs/cgroup/devices")
    if not (base / "devices.allow").exists():
        pytest.skip("no cgroup v1 devices controller on this machine")
    d = base / f"xpu-cdi-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        (d / "devices.deny").write_text("a")
        yield d
    finally:
        for child in d.iterdir():
            if child.is_dir():
                child.rmdir()
        d.rmdir()


@pytest.mark.privileged
class TestAllowV1:
    def test_one_rule_per_write(self, v1_devices: Path) -> None:
        """All rules land (the kernel would apply only the first of a multi-line write)."""
        fd = os.open(v1_devices, os.O_PATH | os.O_DIRECTORY)
        target = cgroup.Target(1, str(v1_devices), fd)
        try:
            cgroup.allow_v1(target, [("c", 240, 1, "rwm"), ("c", 240, 3, "rw"), ("b", 7, 0, "r")])
        finally:
            target.close()
        listed = (v1_devices / "devices.list").read_text().split("\n")
        assert {"c 240:1 rwm", "c 240:3 rw", "b 7:0 r"} <= set(listed)

    def test_parent_denies(self, v1_devices: Path) -> None:
        """A child cgroup cannot get what its parent denies: EPERM with the rule and the reason."""
        child = v1_devices / "c"
        child.mkdir()
        fd = os.open(child, os.O_PATH | os.O_DIRECTORY)
        target = cgroup.Target(1, str(child), fd)
        try:
            with pytest.raises(HookError, match=r"cannot allow 'c 240:1 rwm' .*Operation not permitted"):
                cgroup.allow_v1(target, [("c", 240, 1, "rwm")])
        finally:
            target.close()


@pytest.mark.privileged
def test_v2_without_program_allows_all() -> None:
    """A cgroup2 group with no device program: nothing to replace, 0 returned, nothing journalled."""
    unified = Path("/sys/fs/cgroup/unified")
    if not (unified / "cgroup.procs").exists():
        pytest.skip("no cgroup2 hierarchy mounted at /sys/fs/cgroup/unified")
    d = unified / f"xpu-cdi-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        target = cgroup.Target(2, str(d), os.open(d, os.O_RDONLY | os.O_DIRECTORY))
        undo = Undo()
        try:
            assert cgroup.allow_v2(target, [("c", 240, 1, "rwm")], undo) == 0
            assert undo.rollback() == []
        finally:
            target.close()
    finally:
        d.rmdir()


@pytest.mark.privileged
def test_v2_refusal_names_the_fix(v1_devices: Path) -> None:
    """When the kernel refuses the device program, the error names CDI mode and the wrapper runtime."""
    target = cgroup.Target(2, str(v1_devices), os.open(v1_devices, os.O_RDONLY | os.O_DIRECTORY))
    undo = Undo()
    try:
        with pytest.raises(HookError) as info:
            cgroup.allow_v2(target, [("c", 240, 1, "rwm")], undo)
    finally:
        target.close()
    msg = str(info.value)
    assert msg.startswith(f"cgroup v2: cannot add the devices to {str(v1_devices)!r} (bpf 'BPF_PROG_QUERY': ")
    assert "through CDI" in msg and "xpu-container-runtime wrapper" in msg
    assert undo.rollback() == []
