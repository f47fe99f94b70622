"""The one equality rule of the binaries (hotpath/lib/json.h, fj_equal), seen
through xpu-container-runtime: a hook two devices share is added once, a rule
or a group config.json already holds is not added again, and values equal
only in Python's eyes (1 and 1.0, 1 and true, a member order) are not taken
as equal where it matters.  Black-box: the wrapper runs /bin/true as the
real runtime and the test reads the config.json it wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

from support.hookkit import hook_binary

KIND = "example.com/gpu"


def run_wrapper(tmp_path: Path, devices: List[Dict[str, Any]], config: Dict[str, Any],
                index: "Dict[str, Any] | None" = None, want: str = "") -> Dict[str, Any]:
    """config.json as the wrapper leaves it after asking for every device of *devices* (by annotation)."""
    specs = tmp_path / "cdi"
    specs.mkdir(exist_ok=True)
    (specs / "gpu.json").write_text(json.dumps({"cdiVersion": "0.6.0", "kind": KIND, "devices": devices}))
    if index is not None:
        (specs / "gpu.json.xpu-cdi").write_text(json.dumps(index))
    names = ",".join(f"{KIND}={d['name']}" for d in devices)
    (tmp_path / "config.json").write_text(json.dumps({"ociVersion": "1.0.2", "root": {"path": "rootfs"},
                                                      "annotations": {} if want else {"cdi.k8s.io/t": names},
                                                      **config}))
    r = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(tmp_path), "c1"],
                       capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": "/bin/true", "XPU_CDI_SPEC_DIRS": str(specs)})
    assert r.returncode == 0, r.stderr
    return json.loads((tmp_path / "config.json").read_text())


def hook(**fields: Any) -> Dict[str, Any]:
    return {"hookName": "createContainer", "path": "/usr/bin/h", **fields}


def test_a_shared_hook_is_added_once_whatever_its_member_order(tmp_path: Path) -> None:
    a = hook(args=["h", "x"], timeout=5, env=["A=1"])
    b = dict(reversed(list(a.items())))  # the same hook, members in another order
    big = hook(args=["h"], **{f"x{i}": i for i in range(100)})  # more members than any repr cut-off
    got = run_wrapper(tmp_path, [{"name": "0", "containerEdits": {"hooks": [a, big]}},
                                 {"name": "1", "containerEdits": {"hooks": [b, dict(big)]}}], {})
    assert got["hooks"]["createContainer"] == [{"path": "/usr/bin/h", "args": ["h", "x"], "env": ["A=1"],
                                                "timeout": 5}, {"path": "/usr/bin/h", "args": ["h"]}]


def test_hooks_equal_only_to_python_are_kept_apart(tmp_path: Path) -> None:
    """1 and 1.0 are different numbers, "1" is not 1, true is not 1: hooks that differ so are not merged
    (seen through the env each carries, since only args, env and timeout reach config.json)."""
    marks = ["1", 1, 1.0, True, 1]
    hooks = [hook(env=[f"MARK={i}"], x=m) for i, m in enumerate(marks)]
    hooks[4]["env"] = ["MARK=1"]  # the same as the second one: merged with it
    got = run_wrapper(tmp_path, [{"name": str(i), "containerEdits": {"hooks": [h]}} for i, h in enumerate(hooks)],
                      {})
    assert [h["env"] for h in got["hooks"]["createContainer"]] == [["MARK=0"], ["MARK=1"], ["MARK=2"], ["MARK=3"]]


def test_a_hook_timeout_that_is_not_an_integer_is_refused(tmp_path: Path) -> None:
    for timeout in (1.5, 1.0, "1", True):
        (tmp_path / "cdi").mkdir(exist_ok=True)
        (tmp_path / "cdi" / "gpu.json").write_text(json.dumps({"cdiVersion": "0.6.0", "kind": KIND, "devices": [
            {"name": "0", "containerEdits": {"hooks": [hook(timeout=timeout)]}}]}))
        text = json.dumps({"ociVersion": "1.0.2", "annotations": {"cdi.k8s.io/t": f"{KIND}=0"}})
        (tmp_path / "config.json").write_text(text)
        r = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(tmp_path), "c1"],
                           capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": "/bin/true",
                                "XPU_CDI_SPEC_DIRS": str(tmp_path / "cdi")})
        assert (r.returncode, r.stderr) == (1, "xpu-container-runtime: hook /usr/bin/h: timeout is not an integer "
                                               "(seconds)\n"), timeout
        assert (tmp_path / "config.json").read_text() == text


def test_a_rule_or_group_already_there_is_not_added_again(tmp_path: Path) -> None:
    config = {"linux": {"resources": {"devices": [{"access": "rw", "minor": 3, "major": 1, "type": "c",
                                                   "allow": True}]}},
              "process": {"user": {"uid": 0, "gid": 0, "additionalGids": [44]}, "env": []}}
    node = {"path": "/dev/null", "type": "c", "major": 1, "minor": 3, "fileMode": 0o666, "permissions": "rw"}
    got = run_wrapper(tmp_path, [{"name": "0", "containerEdits": {"deviceNodes": [node], "additionalGids": [44, 45]}}],
                      config)
    assert got["linux"]["resources"]["devices"] == config["linux"]["resources"]["devices"]
    assert got["process"]["user"]["additionalGids"] == [44, 45]


def test_an_index_whose_format_is_not_the_integer_1_is_not_used(tmp_path: Path) -> None:
    """xpuCdiIndex 1.0 or true is no index of format 1: env selection stays off for its kind, nothing edited."""
    for fmt in (1.0, True):
        index = {"xpuCdiIndex": fmt, "kind": KIND, "selection": {"env": ["GPU_DEVS"], "none": [], "all": []},
                 "indices": {"0": "0"}, "all": None, "knownSelection": {}}
        config = {"process": {"env": ["GPU_DEVS=0"]}}
        got = run_wrapper(tmp_path, [{"name": "0", "containerEdits": {"env": ["PICKED=1"]}}], config, index,
                          want="env")
        assert got["process"]["env"] == ["GPU_DEVS=0"], fmt
    index["xpuCdiIndex"] = 1
    got = run_wrapper(tmp_path, [{"name": "0", "containerEdits": {"env": ["PICKED=1"]}}], config, index, want="env")
    assert got["process"]["env"] == ["GPU_DEVS=0", "PICKED=1"]


def test_nodes_replace_by_path_in_one_pass(tmp_path: Path) -> None:
    """Nodes of several devices over a config.json that has some: an entry whose path a new node has
    is replaced, the others keep their order in front; a path two devices share goes in once (the
    merge of the devices' edits keeps its first); each allow rule once, a rule already there (any
    member order) not again."""
    def node(path: str, minor: int) -> Dict[str, Any]:
        return {"path": path, "type": "c", "major": 1, "minor": minor, "fileMode": 0o666, "permissions": "rw"}

    config = {"linux": {"devices": [{"path": "/dev/keep", "type": "c", "major": 1, "minor": 9},
                                    {"path": "/dev/a", "type": "c", "major": 9, "minor": 9},
                                    {"path": "/dev/keep2", "type": "c", "major": 1, "minor": 8}],
                        "resources": {"devices": [{"minor": 7, "access": "rw", "type": "c", "major": 1,
                                                   "allow": True}]}}}
    devices = [{"name": "0", "containerEdits": {"deviceNodes": [node("/dev/a", 3), node("/dev/ctl", 5)]}},
               {"name": "1", "containerEdits": {"deviceNodes": [node("/dev/b", 7), node("/dev/ctl", 5)]}}]
    got = run_wrapper(tmp_path, devices, config)
    assert [(d["path"], d["major"], d["minor"]) for d in got["linux"]["devices"]] == [
        ("/dev/keep", 1, 9), ("/dev/keep2", 1, 8), ("/dev/a", 1, 3), ("/dev/ctl", 1, 5), ("/dev/b", 1, 7)]
    rules = got["linux"]["resources"]["devices"]
    assert [(r["minor"], r["access"]) for r in rules] == [(7, "rw"), (3, "rw"), (5, "rw")]
