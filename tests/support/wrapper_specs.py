"""A hand-written Kunlunxin CDI spec and hook index, as `xpu-cdi generate`
writes them (numbers included, so no device nodes are needed), and a
config.json to apply them to (the wrapper's black-box tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

KIND = "kunlunxin.com/xpu"


def spec(cards: int = 4) -> Dict[str, Any]:
    """A Kunlunxin spec like `generate` writes, with the numbers in it."""
    devices = [{"name": str(i), "containerEdits": {"deviceNodes": [
        {"path": f"/dev/xpu{i}", "hostPath": f"/host/dev/xpu{i}", "type": "c", "major": 240, "minor": i,
         "fileMode": 438, "permissions": "rwm"}]}} for i in range(cards)]
    return {"cdiVersion": "0.5.0", "kind": KIND, "devices": devices, "containerEdits": {
        "deviceNodes": [{"path": "/dev/xpuctrl", "hostPath": "/host/dev/xpuctrl", "type": "c", "major": 240,
                         "minor": 200, "fileMode": 438, "permissions": "rwm"}],
        "mounts": [{"hostPath": "/host/usr/local/xpu", "containerPath": "/usr/local/xpu",
                    "options": ["ro", "nosuid", "nodev", "bind"]}],
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/xpu-cdi-hook",
                   "args": ["xpu-cdi-hook", "update-ldcache", "--folder", "/usr/local/xpu/lib64"],
                   "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "timeout": 10}]}}


def index(cards: int = 4) -> Dict[str, Any]:
    """The hook index `generate` writes beside that spec."""
    return {"xpuCdiIndex": 1, "kind": KIND, "profile": "kunlunxin",
            "selection": {"env": ["CXPU_VISIBLE_DEVICES", "CXPU_VISIBLE_DEVICES"], "aliases": None,
                          "none": ["", "void", "none"]},
            "indices": {str(i): str(i) for i in range(cards)}, "all": None, "spec": "kunlunxin.com-xpu.json",
            "knownSelection": {"XPU_VISIBLE_DEVICES": KIND, "CXPU_VISIBLE_DEVICES": KIND,
                               "ASCEND_VISIBLE_DEVICES": "huawei.com/npu"}}


def base_config() -> Dict[str, Any]:
    """A config.json with env, mounts and a deny-all device rule already in it."""
    return {
        "process": {"env": ["PATH=/bin", "LD_LIBRARY_PATH=/opt/app/lib", "KEEP=1"]},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/usr/local/xpu/etc", "type": "bind", "source": "/srv/etc", "options": ["bind"]},
                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}],
        "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}},
    }


def spec_dir(d: Path) -> Path:
    """*d* made a CDI spec dir holding the 4-card spec and its index."""
    d.mkdir()
    (d / "kunlunxin.com-xpu.json").write_text(json.dumps(spec()))
    (d / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(index()))
    return d
