"""The `cdi.k8s.io/` annotation syntax, one table (tests/data/vectors/
annotations.json) checked against both readers: the Python tooling
(cdi/names.py, with which the device plugin builds and checks the
annotations it returns) and the compiled binaries, black-box through
`xpu-container-runtime create` (the devices it picked read back from the
nodes it wrote into config.json).  A rule changed on one side only fails here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from xpu_cdi.cdi import names
from xpu_cdi.errors import SelectionError

from support.hookkit import hook_binary

VECTORS = json.loads((Path(__file__).parent.parent / "data" / "vectors" / "annotations.json").read_text())["cases"]
KIND = "kunlunxin.com/xpu"
DEVICES = ["0", "1", "2", "3", "all"]
MAJOR = 511  # an unused character major: the wrapper writes the numbers the spec gives


def ids(case: Dict[str, Any]) -> str:
    return json.dumps(case["annotations"])[:40]


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A spec whose device DEVICES[N] has one node of minor N."""
    d = tmp_path_factory.mktemp("annotation-specs")
    devices = [{"name": n, "containerEdits": {"deviceNodes": [
        {"path": f"/dev/vec-{i}", "hostPath": "/dev/null", "type": "c", "major": MAJOR, "minor": i}]}}
        for i, n in enumerate(DEVICES)]
    (d / "xpu.json").write_text(json.dumps({"cdiVersion": "0.6.0", "kind": KIND, "devices": devices}))
    return d


@pytest.mark.parametrize("case", VECTORS, ids=ids)
def test_python(case: Dict[str, Any]) -> None:
    if "want" in case:
        assert names.devices_from_annotations(case["annotations"]) == [f"{KIND}={n}" for n in case["want"]]
    else:
        with pytest.raises(SelectionError):
            names.devices_from_annotations(case["annotations"])


@pytest.mark.parametrize("case", VECTORS, ids=ids)
def test_wrapper(case: Dict[str, Any], spec_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "rootfs").mkdir()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"ociVersion": "1.0.2", "root": {"path": "rootfs"},
                                  "annotations": case["annotations"], "process": {"env": []}}))
    before = config.read_bytes()
    r = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(tmp_path), "c1"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       env={"PATH": "", "XPU_CDI_RUNTIME": "/bin/true", "XPU_CDI_SPEC_DIRS": str(spec_dir)})
    if "want" in case:
        assert (r.returncode, r.stderr) == (0, ""), (case, r.stderr)
        got: List[str] = [DEVICES[n["minor"]] for n in json.loads(config.read_text())["linux"]["devices"]
                          if n["major"] == MAJOR]
        assert got == case["want"], case
    else:
        assert r.returncode == 1 and r.stderr.startswith("xpu-container-runtime: annotation "), (case, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
        assert config.read_bytes() == before
