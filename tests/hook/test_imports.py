"""The hook's hot path stays light: run the entry point the way the
launcher does (-I -S, explicit sys.path) and look at sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import xpu_cdi

SRC = os.path.dirname(os.path.dirname(os.path.abspath(xpu_cdi.__file__ or "")))
FORBIDDEN = ["click", "yaml", "jsonschema", "pyudev"]
# not even these before a container asks for a device (most containers never do)
HEAVY = ["json", "re", "typing", "enum", "argparse", "subprocess", "xpu_cdi.cdi.registry", "xpu_cdi.cdi.names"]

SPEC = {"cdiVersion": "0.5.0", "kind": "kunlunxin.com/xpu",
        "devices": [{"name": "1", "containerEdits": {"deviceNodes": [
            {"path": "/dev/xpu1", "type": "c", "major": 240, "minor": 1}]}}]}
INDEX = {"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu", "profile": "kunlunxin",
         "selection": {"env": ["CXPU_VISIBLE_DEVICES"], "aliases": None, "none": ["", "void"]},
         "indices": {"1": "1"}, "all": None, "spec": "kunlunxin.com-xpu.json"}


def modules_after(tmp_path: Path, env: List[str], annotations: dict) -> List[str]:
    """Run prestart in a fresh `python -I -S`; return sys.modules afterwards."""
    cdi = tmp_path / "cdi"
    cdi.mkdir(exist_ok=True)
    (cdi / "kunlunxin.com-xpu.json").write_text(json.dumps(SPEC))
    (cdi / "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(INDEX))
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}, "process": {"env": env},
                                                    "annotations": annotations}))
    state = json.dumps({"id": "imports", "pid": 999999999, "bundle": str(bundle)})
    code = (f"import sys; sys.path[0:0] = [{SRC!r}]\n"
            "from xpu_cdi.hook.main import main\n"
            f"main(['prestart', '--spec-dir', {str(cdi)!r}])\n"
            "print('\\n'.join(sorted(sys.modules)))\n")
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=state, capture_output=True, text=True)
    assert r.stdout, r.stderr
    return r.stdout.split()


def test_nothing_requested_imports_nothing_heavy(tmp_path: Path) -> None:
    """No selection: none of json, re, typing, enum, the registry or the names module are imported."""
    mods = modules_after(tmp_path, ["PATH=/bin"], {})
    assert [m for m in FORBIDDEN + HEAVY if m in mods] == []


def test_injection_path_never_imports_click_yaml_jsonschema_pyudev(tmp_path: Path) -> None:
    """A request (env and annotation) goes through registry and inject: still no click/yaml/jsonschema/pyudev."""
    mods = modules_after(tmp_path, ["CXPU_VISIBLE_DEVICES=1"], {"cdi.k8s.io/x_1": "kunlunxin.com/xpu=1"})
    assert "xpu_cdi.hook.inject" in mods and "xpu_cdi.cdi.registry" in mods  # it did get that far
    assert [m for m in FORBIDDEN if m in mods] == []
    assert "argparse" not in mods and "subprocess" not in mods


def test_entry_modules_import_alone() -> None:
    """Every hook module imports on its own in a fresh interpreter (no hidden import order)."""
    for mod in ("main", "state", "select", "plan", "inject", "rootfs", "cgroup", "ldcache", "links", "jsonload",
                "launcher"):
        r = subprocess.run([sys.executable, "-I", "-S", "-c",
                            f"import sys; sys.path[0:0] = [{SRC!r}]; import xpu_cdi.hook.{mod}"],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"xpu_cdi.hook.{mod}: {r.stderr}"
