"""Failures in the middle of an injection, through real runc: the
container never starts, what the hook did is undone (mounts, directories,
nodes on disk), and nothing reaches the host."""

from __future__ import annotations

import os

import pytest

from support import runtimes
from support.hookkit import HookHost, container_output, host_mounts, tree

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]


def no_dev_tmpfs(b: "runtimes.Bundle") -> None:
    """Nodes then land in the rootfs on disk, where an undo is observable."""
    b.config["mounts"] = [m for m in b.config["mounts"] if not m["destination"].startswith("/dev")]


# what runc itself leaves in an on-disk /dev (its default devices and links)
RUNC_DEV = {"null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "ptmx",
            "pts", "shm"}


def assert_unchanged(before: "list[str]", after: "list[str]") -> None:
    """*after* is *before* plus at most runc's own /dev entries."""
    assert set(before) <= set(after), f"removed: {sorted(set(before) - set(after))}"
    added = [e.split()[0] for e in set(after) - set(before)]
    assert all(e.startswith("dev/") and e.split("/")[1] in RUNC_DEV for e in added), \
        f"the hook left {sorted(added)} in the rootfs"


def test_bad_mount_source_rolls_back(xpu: HookHost) -> None:
    """A group-writable mount source after a successful mount: everything is undone."""
    smi = xpu.host.path("/usr/local/bin/xpu-smi")
    os.chmod(smi, 0o775)
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1,3"])
    no_dev_tmpfs(b)
    b.write()
    rootfs_before, mounts_before = tree(b.rootfs), host_mounts(str(xpu.base))
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "xpu-cdi-hook: mount source" in r.stderr and "is group- or world-writable (mode 0o775)" in r.stderr, \
        container_output(r)
    assert_unchanged(rootfs_before, tree(b.rootfs))
    assert host_mounts(str(xpu.base)) == mounts_before
    assert "error: mount source" in xpu.log_text()


def test_mount_source_not_root_owned(xpu: HookHost) -> None:
    """A driver dir owned by another user is refused, naming the owner."""
    os.chown(xpu.host.path("/usr/local/xpu"), 1000, 1000)
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "is owned by uid 1000, not root" in r.stderr, container_output(r)


def test_existing_conflicting_node(xpu: HookHost) -> None:
    """An image file where a device node must go: refused, nothing else left behind."""
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1,3"])
    no_dev_tmpfs(b)
    (b.rootfs / "dev" / "xpu3").write_text("not a device\n")
    b.write()
    before = tree(b.rootfs)
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "device node '/dev/xpu3' already exists in the container and is not c 240:3" in r.stderr, \
        container_output(r)
    assert_unchanged(before, tree(b.rootfs))


def test_ldconfig_failure_rolls_back(xpu: HookHost) -> None:
    """The image's ldconfig fails: the hook fails with its last line, quoted (a terminal escape the image
    printed shows as \\x1b), mounts and files are undone."""
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
    no_dev_tmpfs(b)
    fake = b.rootfs / "sbin" / "ldconfig"
    fake.write_text("#!/bin/sh\necho 'first line'\nprintf 'ldconfig: \\033[31mcannot do it\\n\\n' >&2\nexit 3\n")
    fake.chmod(0o755)
    b.write()
    before, mounts_before = tree(b.rootfs), host_mounts(str(xpu.base))
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "update-ldcache: the image's /sbin/ldconfig exited with 3: 'ldconfig: " in r.stderr, container_output(r)
    # the hook's own log line, as it wrote it (runc's stderr escapes backslashes once more)
    assert "update-ldcache: the image's /sbin/ldconfig exited with 3: 'ldconfig: \\x1b[31mcannot do it'" in \
        xpu.log_text(), xpu.log_text()
    assert_unchanged(before, tree(b.rootfs))
    assert host_mounts(str(xpu.base)) == mounts_before


def test_broken_spec_beside_good_one(xpu: HookHost) -> None:
    """A broken spec file next to ours is skipped (and logged); the container gets its card."""
    (xpu.spec_dir / "zz-broken.json").write_text("{not json")
    (xpu.spec_dir / "vendor.com-thing.yaml").write_text("cdiVersion: 0.5.0\nkind: [\n")
    b = xpu.bundle(["sh", "-c", "ls /dev/xpu1"], env=["CXPU_VISIBLE_DEVICES=1"])
    r = runtimes.run_runc(b)
    assert r.returncode == 0, container_output(r)
    assert "/dev/xpu1" in r.stdout
    log = xpu.log_text()
    assert "warning: spec" in log and "zz-broken.json" in log and "not valid JSON" in log
    assert "injected kunlunxin.com/xpu=1" in log


def test_unknown_card_via_runc(xpu: HookHost) -> None:
    """runc shows the hook's one-line message and the container is not created."""
    b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1,12"])
    r = runtimes.run_runc(b)
    assert r.returncode != 0 and "RAN" not in r.stdout
    assert "xpu-cdi-hook: CXPU_VISIBLE_DEVICES='1,12': no card 12" in r.stderr, container_output(r)
    listed = runtimes.subprocess.run(["runc", "list", "--format", "json"], capture_output=True, text=True).stdout
    assert b.dir.name not in (listed or "")


V1_DEVICES = "/sys/fs/cgroup/devices"


@pytest.mark.skipif(not os.path.isdir(V1_DEVICES), reason="no cgroup v1 devices controller on this host")
def test_cgroup_rule_the_parent_denies_rolls_back(xpu: HookHost) -> None:
    """The container's v1 device cgroup sits below a parent that denies the cards' major: the
    hook's allow rule is refused by the kernel, the hook says which rule in which cgroup, and
    what it had made (nodes, mounts) is undone before runc gives up."""
    parent = os.path.join(V1_DEVICES, runtimes.unique("xpu-cdi-deny"))
    os.mkdir(parent)
    try:
        with open(os.path.join(parent, "devices.deny"), "w") as f:
            f.write(f"c {fakehost_major(xpu)}:* rw")  # not m: runc allows mknod of any char node
        b = xpu.bundle(["sh", "-c", "echo RAN"], env=["CXPU_VISIBLE_DEVICES=1"])
        no_dev_tmpfs(b)
        b.config["linux"]["cgroupsPath"] = f"/{os.path.basename(parent)}/ctr"
        b.write()
        rootfs_before, mounts_before = tree(b.rootfs), host_mounts(str(xpu.base))
        r = runtimes.run_runc(b)
        assert r.returncode != 0 and "RAN" not in r.stdout
        child = os.path.join(parent, "ctr")
        # the control node's rule is the first the hook writes
        want = (f"stderr: xpu-cdi-hook: cgroup device rules: cgroup v1: cannot allow 'c {fakehost_major(xpu)}:200 "
                f"rwm' in '{child}': Operation not permitted\\n")
        assert want in r.stderr, container_output(r)
        assert "error: cgroup device rules: cgroup v1: cannot allow" in xpu.log_text()
        assert_unchanged(rootfs_before, tree(b.rootfs))
        assert host_mounts(str(xpu.base)) == mounts_before
    finally:
        runtimes.remove_cgroups(os.path.basename(parent))


def fakehost_major(xpu: HookHost) -> int:
    """The major of the fake host's card nodes."""
    return os.major(os.stat(xpu.host.path("/dev/xpu1")).st_rdev)
