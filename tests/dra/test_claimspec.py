"""xpu_cdi.node.claimspec: a claim's own CDI spec, written whole, read by the runtimes' rules,
listed and removed, the static specs beside it untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xpu_cdi.cdi import registry, validate
from xpu_cdi.node import claimspec

UID = "0b7c3f1e-2a4d-4e8f-9a61-5d2c7b9e4f10"
NODE = {"deviceNodes": [{"path": "/dev/davinci100", "hostPath": "/dev/vdavinci100", "type": "c", "major": 241,
                         "minor": 1100, "permissions": "rwm"}]}
COMMON = {"deviceNodes": [{"path": "/dev/davinci_manager", "type": "c", "major": 240, "minor": 0}],
          "mounts": [{"hostPath": "/usr/local/dcmi", "containerPath": "/usr/local/dcmi",
                      "options": ["ro", "nosuid", "nodev", "bind"]}]}


def test_write_resolves_and_removes(tmp_path: Path) -> None:
    static = tmp_path / "huawei.com-npu.json"
    static.write_text(json.dumps({"cdiVersion": "0.5.0", "kind": "huawei.com/npu",
                                  "devices": [{"name": "0", "containerEdits": {"deviceNodes": [
                                      {"path": "/dev/davinci0"}]}}]}))
    before = static.read_bytes()
    got = claimspec.write(str(tmp_path), "huawei.com", UID, [("vnpu-100", NODE)], COMMON)
    assert got == [f"k8s.huawei.com/claim={UID}-vnpu-100"]
    path = claimspec.path(str(tmp_path), "huawei.com", UID)
    spec = json.loads(Path(path).read_text())
    assert not validate.problems(spec), validate.problems(spec)
    assert spec["cdiVersion"] == "0.5.0" and spec["containerEdits"] == COMMON
    reg = registry.load([str(tmp_path)])
    dev = reg.devices[got[0]]
    assert dev.edits["deviceNodes"][0]["hostPath"] == "/dev/vdavinci100"
    assert "huawei.com/npu=0" in reg.devices and static.read_bytes() == before
    assert claimspec.listed(str(tmp_path), "huawei.com") == {UID: path}
    assert claimspec.listed(str(tmp_path), "kunlunxin.com") == {}
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")], "a temp file left"
    assert claimspec.remove(str(tmp_path), "huawei.com", UID) is True
    assert claimspec.remove(str(tmp_path), "huawei.com", UID) is False
    assert claimspec.listed(str(tmp_path), "huawei.com") == {} and static.read_bytes() == before


def test_rewrite_replaces(tmp_path: Path) -> None:
    claimspec.write(str(tmp_path), "huawei.com", UID, [("vnpu-100", NODE)], {})
    got = claimspec.write(str(tmp_path), "huawei.com", UID, [("vnpu-101", NODE), ("vnpu-102", NODE)], {})
    assert [g.rpartition("-")[2] for g in got] == ["101", "102"]
    spec = json.loads(Path(claimspec.path(str(tmp_path), "huawei.com", UID)).read_text())
    assert [d["name"] for d in spec["devices"]] == [f"{UID}-vnpu-101", f"{UID}-vnpu-102"]
    assert "containerEdits" not in spec


@pytest.mark.parametrize("uid", ["../etc/passwd", "", "a" * 65, "a/b"])
def test_uid_that_names_another_file_refused(tmp_path: Path, uid: str) -> None:
    with pytest.raises(ValueError):
        claimspec.write(str(tmp_path), "huawei.com", uid, [("x", NODE)], {})
    assert not list(tmp_path.iterdir())
