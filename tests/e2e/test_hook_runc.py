"""The prestart hook with real runc and crun: cards selected by the
container's env or annotations appear as nodes the cgroup allows, the
driver dir is mounted read-only, nothing else is touched."""

from __future__ import annotations

import pytest

from support import runtimes
from support.runtimes import CARDS, ENXIO
from support.hookkit import HookHost, container_output, node_line, probe

pytestmark = [pytest.mark.runtime, pytest.mark.privileged]

XPU_NODES = ["/dev/xpu0", "/dev/xpu1", "/dev/xpu2", "/dev/xpu3", "/dev/xpuctrl"]


def run(bundle: "runtimes.Bundle", runtime: str, v2: bool = False):  # type: ignore[no-untyped-def]
    runtimes.require(runtime)
    if runtime == "crun":
        return runtimes.run_runc(bundle, runtime="crun", private_ns=True)
    return runtimes.run_runc(bundle, runtime=runtime, cgroup_v2=v2)


def assert_xpu_1_3(out: str) -> None:
    """/dev/xpu1, /dev/xpu3, /dev/xpuctrl present with their numbers and
    allowed (ENXIO), /dev/xpu0 and /dev/xpu2 absent, /usr/local/xpu read-only."""
    assert node_line("/dev/xpu1", 240, 1) in out
    assert node_line("/dev/xpu3", 240, 3) in out
    assert node_line("/dev/xpuctrl", 240, 200) in out
    assert out.count(f"W sh: can't create /dev/xpu1: {ENXIO}") == 1
    assert f"W sh: can't create /dev/xpu3: {ENXIO}" in out
    assert f"W sh: can't create /dev/xpuctrl: {ENXIO}" in out
    assert "/dev/xpu0 absent" in out and "/dev/xpu2 absent" in out
    mount = [line for line in out.splitlines() if line.startswith("M ")]
    assert len(mount) == 1 and " ro," in mount[0] and "nosuid" in mount[0] and "nodev" in mount[0], out
    assert "T touch: /usr/local/xpu/probe: Read-only file system" in out
    assert out.rstrip().endswith("done")


@pytest.mark.parametrize("runtime, v2", [("runc", False), ("crun", False), ("runc", True)],
                         ids=["runc-cgroup-v1", "crun-cgroup-v1", "runc-cgroup-v2"])
def test_env_selection_injects_cards_1_3(xpu: HookHost, runtime: str, v2: bool) -> None:
    """CXPU_VISIBLE_DEVICES=1,3: cards 1 and 3 and the control node, allowed by the cgroup, driver dir ro."""
    b = xpu.bundle(probe(XPU_NODES, "/usr/local/xpu"), env=["CXPU_VISIBLE_DEVICES=1,3"])
    r = run(b, runtime, v2)
    out = container_output(r)
    assert r.returncode == 0, out
    assert_xpu_1_3(r.stdout + r.stderr)
    log = xpu.log_text()
    assert "injected kunlunxin.com/xpu=1, kunlunxin.com/xpu=3" in log
    v2 = v2 or runtimes.cgroup_v2_only()  # a cgroup v2-only host has no v1 device controller
    assert f"cgroup v{2 if v2 else 1}" in log
    if v2:
        assert "1 device program(s) replaced" in log


@pytest.mark.parametrize("env, cards", [
    (["CXPU_VISIBLE_DEVICES=4,5", "XPU_VISIBLE_DEVICES=0,1"], "xpu4 xpu5"),
    (["XPU_VISIBLE_DEVICES=0,1"], ""),
], ids=["vendor-selector-wins", "in-process-variable-selects-nothing"])
def test_only_the_vendor_selector_selects(xpu: HookHost, env: list, cards: str) -> None:
    """Under runc with the hook: an image exporting Kunlunxin's in-process XPU_VISIBLE_DEVICES=0,1 never
    gets host cards 0 and 1; CXPU_VISIBLE_DEVICES=4,5 gives exactly xpu4 and xpu5, allowed (ENXIO)."""
    b = xpu.bundle(["sh", "-c", CARDS], env=env)
    r = run(b, "runc")
    assert r.returncode == 0, container_output(r)
    assert r.stdout.splitlines()[0].strip() == cards, container_output(r)
    assert r.stdout.count(ENXIO) == len(cards.split()), container_output(r)


@pytest.mark.parametrize("runtime, v2", [("runc", False), ("runc", True)], ids=["cgroup-v1", "cgroup-v2"])
def test_runtime_rules_still_apply(xpu: HookHost, runtime: str, v2: bool) -> None:
    """The hook only adds rules: a node the runtime made without an allow rule stays denied (EPERM),
    the runtime's default allowed devices still work."""
    b = xpu.bundle(["sh", "-c", "(echo x > /dev/xpu7) 2>&1; (echo x > /dev/xpu1) 2>&1; "
                                "echo x > /dev/null && echo null-ok"], env=["CXPU_VISIBLE_DEVICES=1"])
    b.config["linux"]["devices"] = [{"path": "/dev/xpu7", "type": "c", "major": 240, "minor": 7, "fileMode": 438}]
    r = run(b, runtime, v2)
    assert r.returncode == 0, container_output(r)
    assert "can't create /dev/xpu7: Operation not permitted" in r.stdout + r.stderr
    assert f"can't create /dev/xpu1: {ENXIO}" in r.stdout + r.stderr
    assert "null-ok" in r.stdout


def test_ascend_range(npu: HookHost) -> None:
    """ASCEND_VISIBLE_DEVICES=0-1: davinci0/1 and the manager nodes, davinci2 absent, driver lib64 ro."""
    nodes = ["/dev/davinci0", "/dev/davinci1", "/dev/davinci2", "/dev/davinci_manager", "/dev/devmm_svm",
             "/dev/hisi_hdc"]
    b = npu.bundle(probe(nodes, "/usr/local/Ascend/driver/lib64"), env=["ASCEND_VISIBLE_DEVICES=0-1"])
    r = run(b, "runc")
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/davinci0", 241, 0) in out and node_line("/dev/davinci1", 241, 1) in out
    assert "/dev/davinci2 absent" in out
    for i, name in enumerate(["devmm_svm", "hisi_hdc", "davinci_manager"]):
        assert node_line(f"/dev/{name}", 241, 200 + i) in out
        assert f"can't create /dev/{name}: {ENXIO}" in out
    assert f"can't create /dev/davinci1: {ENXIO}" in out
    assert "T touch: /usr/local/Ascend/driver/lib64/probe: Read-only file system" in out


def test_all_and_annotation(xpu: HookHost) -> None:
    """CXPU_VISIBLE_DEVICES=all gives all 8 cards; a cdi.k8s.io annotation alone also selects."""
    b = xpu.bundle(["sh", "-c", "ls /dev | grep -c '^xpu[0-9]'"], env=["CXPU_VISIBLE_DEVICES=all"])
    r = run(b, "runc")
    assert r.returncode == 0 and r.stdout.strip() == "8", container_output(r)
    b = xpu.bundle(probe(["/dev/xpu2", "/dev/xpu3"], "/usr/local/xpu"),
                   annotations={"cdi.k8s.io/test_dev": "kunlunxin.com/xpu=2"})
    r = run(b, "runc")
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/xpu2", 240, 2) in r.stdout and "/dev/xpu3 absent" in r.stdout


def test_nothing_requested_touches_nothing(xpu: HookHost) -> None:
    """A container that asks for nothing starts untouched and the hook logs nothing."""
    b = xpu.bundle(["sh", "-c", "ls /dev; ls /usr/local"], env=["CXPU_VISIBLE_DEVICES=void"])
    r = run(b, "runc")
    assert r.returncode == 0, container_output(r)
    assert "xpu" not in r.stdout
    assert xpu.log_text() == ""
    assert not (b.rootfs / "usr" / "local" / "xpu").exists()


@pytest.fixture
def xpu_userns(installed_hook):  # type: ignore[no-untyped-def]
    """A fake host in a world-traversable temp dir: the mapped root must reach the rootfs
    (pytest's own temp dirs are 0700)."""
    from support import devdirs
    from support import fakehost

    base = devdirs.device_tmpdir("xpu-cdi-userns-")
    base.chmod(0o755)
    try:
        yield HookHost(base / "xpu", installed_hook, "kunlunxin", 8)
    finally:
        fakehost.remove_tree(base)


def test_user_namespace_binds_host_nodes(xpu_userns: HookHost) -> None:
    """In a user namespace the host nodes are bound (mknod'ed nodes could not be opened there),
    files are created as the container's root, ldconfig runs as that root."""
    import subprocess

    xpu = xpu_userns
    b = xpu.bundle(["sh", "-c", PROBE_US], env=["CXPU_VISIBLE_DEVICES=1"])
    b.config["linux"]["namespaces"].append({"type": "user"})
    for key in ("uidMappings", "gidMappings"):
        b.config["linux"][key] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
    b.config["mounts"] = [m for m in b.config["mounts"] if m["destination"] != "/sys"]  # sysfs needs netns
    fake = b.rootfs / "sbin" / "ldconfig"
    fake.write_text("#!/bin/sh\nid -u > /ldconfig.uid\n")
    fake.chmod(0o755)
    subprocess.run(["chown", "-R", "100000:100000", str(b.rootfs)], check=True)
    r = run(b, "runc")
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/xpu1", 240, 1) in out and f"can't create /dev/xpu1: {ENXIO}" in out
    assert (b.rootfs / "usr" / "local" / "xpu").stat().st_uid == 100000  # mount point made as the container's root
    assert "ldconfig ran as 0" in out
    assert "(0 mknod, 2 bind, 0 present)" in xpu.log_text()


PROBE_US = ("stat -c '%n character special file %t:%T %a' /dev/xpu1; (echo x > /dev/xpu1) 2>&1; "
            "echo \"ldconfig ran as $(cat /ldconfig.uid)\"")


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_read_only_rootfs(xpu: HookHost, runtime: str) -> None:
    """root.readonly (readOnlyRootFilesystem): the runtime makes it read-only after the hook ran."""
    b = xpu.bundle(probe(["/dev/xpu1"], "/usr/local/xpu") + [], env=["CXPU_VISIBLE_DEVICES=1"])
    b.config["root"]["readonly"] = True
    b.config["process"]["args"][-1] += "; touch /rootfs-probe 2>&1 | sed 's/^/R /'"
    r = run(b, runtime)
    out = r.stdout + r.stderr
    assert r.returncode == 0, container_output(r)
    assert node_line("/dev/xpu1", 240, 1) in out and f"can't create /dev/xpu1: {ENXIO}" in out
    assert "R touch: /rootfs-probe: Read-only file system" in out


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_create_runtime_stage(xpu: HookHost, runtime: str) -> None:
    """Registered as createRuntime (same namespace and state as prestart) it works the same."""
    b = xpu.bundle(["sh", "-c", "(echo x > /dev/xpu1) 2>&1; true"], env=["CXPU_VISIBLE_DEVICES=1"],
                   stage="createRuntime")
    r = run(b, runtime)
    assert r.returncode == 0 and f"can't create /dev/xpu1: {ENXIO}" in r.stdout, container_output(r)
