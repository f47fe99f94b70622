"""doctor's DRA checks on what a driver leaves: its status file and its checkpoint (the driver on a
real node, registered and publishing, is tests/k8s/test_dra_node.py's)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

from support.doctornode import Node, checks, worst
from xpu_cdi.node import status as _status
from xpu_cdi.node import checkpoint as _cp
from xpu_cdi.node.prepared import PreparedClaims


def status_file(run: Path, checkpoint: Path, pid: int, **kind: Any) -> None:
    """A driver's status file as `xpu-cdi dra-driver` writes it, with *kind*'s fields changed."""
    st: Dict[str, Any] = {"driver": "kunlunxin.com", "pool": "n1", "registered": True, "registration_error": "",
                          "published": True, "publish_error": "", "generation": 1,
                          "devices": {"0": "kunlunxin.com/xpu=0"}, "unhealthy": {},
                          "dra_socket": str(run / "none.sock"), "checkpoint": str(checkpoint), **kind}
    run.mkdir(exist_ok=True)
    (run / "dra-driver-pod1.json").write_text(json.dumps({
        "pid": pid, "pid_namespace": _status.pid_namespace(), "boot_id": "b1", "spec_dirs": [],
        "kinds": {"kunlunxin.com/xpu": st}}))


def test_not_running_is_ok_and_names_the_file_left(node: Node, tmp_path: Path) -> None:
    node.kunlunxin()
    node.generate()
    status_file(tmp_path / "run", tmp_path / "cp.json", pid=2 ** 22 + 7)  # no such pid
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    (r,) = checks(results, "dra-registered")
    assert r["status"] == "ok" and "not running" in r["found"] and "dra-driver-pod1.json" in r["found"], r
    assert not checks(results, "dra-slices")


def test_unpublished_and_corrupt_checkpoint(node: Node, tmp_path: Path) -> None:
    """The API server's refusal quoted; a corrupt checkpoint warns (the driver started empty)."""
    node.kunlunxin()
    node.generate()
    cp = tmp_path / "cp.json"
    cp.write_text("{not json")
    status_file(tmp_path / "run", cp, os.getpid(), published=False,
                publish_error="POST ...: 403 denied by the admission policy")
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    assert worst(results, "dra-registered")["status"] == "ok"
    s = worst(results, "dra-slices")
    assert s["status"] == "fail" and "403 denied by the admission policy" in s["found"], s
    c = worst(results, "dra-checkpoint")
    assert c["status"] == "warn" and "corrupt" in c["found"], c


def test_published_names_no_spec_defines_and_checkpoint_of_another_boot(node: Node, tmp_path: Path) -> None:
    node.kunlunxin()
    node.generate()
    cp = tmp_path / "cp.json"
    _cp.save(str(cp), PreparedClaims("b0"))
    status_file(tmp_path / "run", cp, os.getpid(), devices={"0": "kunlunxin.com/xpu=0", "9": "kunlunxin.com/xpu=9"})
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"))
    s = worst(results, "dra-slices")
    assert s["status"] == "fail" and "kunlunxin.com/xpu=9" in s["found"] and "xpu=0" not in s["found"], s
    c = worst(results, "dra-checkpoint")
    assert c["status"] == "warn" and "from boot b0" in c["found"], c
    assert worst(results, "one-way")["status"] == "ok"


def kubelet_checkpoint(plugin_dir: Path, *entries: Dict[str, Any]) -> None:
    """kubelet's device-manager checkpoint (its layout in 1.37: cards per NUMA node) with *entries*."""
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / "kubelet_internal_checkpoint").write_text(json.dumps(
        {"Data": {"PodDeviceEntries": list(entries), "RegisteredDevices": {}}, "Checksum": 1}))


def proc_with_pods(root: Path, *uids: str) -> Path:
    """A /proc whose processes are containers of pods *uids* (kubelet's cgroup path: pod<uid>)."""
    (root / "proc" / "self").mkdir(parents=True)
    for pid, uid in enumerate(uids, start=100):
        (root / "proc" / str(pid)).mkdir()
        (root / "proc" / str(pid) / "cgroup").write_text(f"0::/kubepods/besteffort/pod{uid}/c0ffee\n")
    return root


RUNNING, GONE, OTHER = ("8f825e0c-591b-413d-b339-58b3eab4140c", "29b95000-3b32-41b2-a180-c0e53b418cfd",
                        "6154a657-3e99-492c-9987-fc200d5725e5")


def test_one_way_warns_of_plugin_cards_still_held_where_dra_serves(node: Node, tmp_path: Path) -> None:
    """A node switched to DRA without draining: a running pod still has cards 0 and 1 from the device
    plugin (kubelet's checkpoint), which the driver publishes as free.  A pod that has ended, or cards
    of a vendor DRA does not serve, are not named."""
    node.kunlunxin()
    node.generate()
    status_file(tmp_path / "run", tmp_path / "cp.json", os.getpid())
    kubelet_checkpoint(tmp_path / "dp",
                       {"PodUID": RUNNING, "ContainerName": "c", "ResourceName": "kunlunxin.com/xpu",
                        "DeviceIDs": {"-1": ["1"], "0": ["0"]}, "AllocResp": ""},
                       {"PodUID": GONE, "ContainerName": "c", "ResourceName": "kunlunxin.com/xpu",
                        "DeviceIDs": {"-1": ["2"]}, "AllocResp": ""},
                       {"PodUID": OTHER, "ContainerName": "c", "ResourceName": "huawei.com/npu",
                        "DeviceIDs": {"-1": ["3"]}, "AllocResp": ""})
    proc = proc_with_pods(tmp_path / "root", RUNNING, OTHER)
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"), "--plugin-dir", str(tmp_path / "dp"),
                                 "--proc-root", str(proc))
    r = worst(results, "one-way")
    assert r["status"] == "warn", r
    assert f"pod {RUNNING}: kunlunxin.com/xpu 0,1" in r["found"] and GONE not in r["found"] and \
        OTHER not in r["found"], r
    assert "delete those pods" in r["fix"], r


def test_one_way_ok_once_the_plugins_pods_are_gone(node: Node, tmp_path: Path) -> None:
    """kubelet keeps a deleted pod's entry until its next allocation: only running pods count."""
    node.kunlunxin()
    node.generate()
    status_file(tmp_path / "run", tmp_path / "cp.json", os.getpid())
    kubelet_checkpoint(tmp_path / "dp", {"PodUID": GONE, "ContainerName": "c", "ResourceName": "kunlunxin.com/xpu",
                                         "DeviceIDs": {"-1": ["2"]}, "AllocResp": ""})
    _code, results = node.doctor("--dra-run-dir", str(tmp_path / "run"), "--plugin-dir", str(tmp_path / "dp"),
                                 "--proc-root", str(proc_with_pods(tmp_path / "root", RUNNING)))
    r = worst(results, "one-way")
    assert r["status"] == "ok" and "kunlunxin.com/xpu by DRA" in r["found"], r
