"""old-driver: a container still holding driver files the host replaced is named, with its paths."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator, List

import pytest

from support import HANG
from support.doctornode import Node, checks, status, worst

pytestmark = pytest.mark.privileged
UID = "0d6c1f8e-3b2a-4c5d-9e8f-112233445566"


def fake_proc(root: Path, pid: int, mountinfo: List[str], cgroup: str) -> None:
    d = root / "proc" / str(pid)
    (d / "ns").mkdir(parents=True)
    (d / "ns" / "mnt").symlink_to(f"mnt:[{4026530000 + pid}]")
    (d / "mountinfo").write_text("".join(line + "\n" for line in mountinfo))
    (d / "cgroup").write_text(cgroup)
    (root / "proc" / "self").mkdir(exist_ok=True)


def test_a_pod_holding_deleted_driver_files_is_named(node: Node, tmp_path: Path) -> None:
    """Pod UID from kubelet's cgroup path (systemd's underscores too); only the deleted mounts
    at the profile's paths are listed; a process in the same mount namespace is read once."""
    node.kunlunxin()
    proc = tmp_path / "p"
    pod = f"0::/kubepods.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice/cri-containerd-ab.scope\n"
    fake_proc(proc, 40, ["1 0 0:1 / / rw - overlay overlay rw",
                         "2 1 8:1 /fake/usr/local/xpu//deleted /usr/local/xpu ro - ext4 /dev/sda1 rw",
                         "3 1 8:1 /data//deleted /data ro - ext4 /dev/sda1 rw",
                         "4 1 8:1 /fake/usr/local/bin/xpu-smi /usr/local/bin/xpu-smi ro - ext4 /dev/sda1 rw"], pod)
    fake_proc(proc, 41, ["2 1 8:1 /other//deleted /usr/local/bin/xpu-smi ro - ext4 /dev/sda1 rw"], pod)
    os.unlink(proc / "proc/41/ns/mnt")
    (proc / "proc/41/ns/mnt").symlink_to("mnt:[4026530040]")  # pid 40's namespace: not read again
    _code, res = node.doctor("--proc-root", str(proc))
    (r,) = checks(res, "old-driver")
    assert r["status"] == "warn", r
    assert r["found"].startswith(f"pod {UID} still has the old driver mounted") and r["found"].endswith(
        ": /usr/local/xpu"), r
    assert "delete the pod" in r["fix"]


def test_nothing_held_is_ok(node: Node, tmp_path: Path) -> None:
    node.kunlunxin()
    proc = tmp_path / "p"
    fake_proc(proc, 7, ["2 1 8:1 /fake/usr/local/xpu /usr/local/xpu ro - ext4 /dev/sda1 rw"], "0::/\n")
    _code, res = node.doctor("--proc-root", str(proc))
    assert status(res, "old-driver") == "ok", res


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A process in a mount namespace of its own with the fake driver dir bound at /usr/local/xpu
    (over a tmpfs at /usr/local, both gone with the process)."""
    src = tmp_path / "driver-v1"
    (src / "lib64").mkdir(parents=True)
    (src / "lib64" / "libxpurt.so.1").write_text("v1\n")
    script = (f"mount -t tmpfs none /usr/local && mkdir -p /usr/local/xpu && mount --bind {src} /usr/local/xpu "
              "&& echo ready && exec sleep infinity")
    p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        yield p
    finally:
        p.kill()
        p.wait(timeout=HANG)


def test_a_real_process_on_a_removed_driver(node: Node, tmp_path: Path, holder: subprocess.Popen) -> None:
    """The kernel's own mountinfo: named once the bound driver dir is removed on the host (the
    upgrade), not before (other processes of the machine may be named too: only ours is asserted)."""
    node.kunlunxin()
    mine = f"process {holder.pid}"
    _code, res = node.doctor("--proc-root", "/")
    assert not [r for r in checks(res, "old-driver") if mine in r["found"]], res
    subprocess.run(["rm", "-rf", str(tmp_path / "driver-v1")], check=True)
    _code, res = node.doctor("--proc-root", "/")
    (r,) = [r for r in checks(res, "old-driver") if r["found"].startswith(mine + " ")]
    assert r["status"] == "warn" and r["found"].endswith(": /usr/local/xpu"), r
    assert worst(res, "old-driver")["status"] == "warn"
