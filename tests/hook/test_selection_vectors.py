"""The selection rules of every profile, one table (tests/data/vectors/
selection.json) checked against the compiled binaries that read it: the
wrapper (`xpu-container-runtime create`, which writes the selected cards'
nodes into config.json) and the hook (`xpu-cdi-hook prestart`, which refuses
a bad value in the same words).  The hook index each case runs under is the
one `generate` writes for that profile (generate.spec.hook_index), so the
profile data, the index writer and the C parser are covered at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from xpu_cdi.generate import profile, spec
from xpu_cdi.model import Card

from support.hookkit import hook_binary

VECTORS = json.loads((Path(__file__).parent.parent / "data" / "vectors" / "selection.json").read_text())["cases"]
PROFILES = profile.load_all([])
MAJOR = 511  # an unused character major: the wrapper writes the numbers the spec gives


def index_of(name: str) -> Dict[str, Any]:
    """The hook index generate writes for a 4-card host of profile *name*."""
    prof = PROFILES[name]
    view = SimpleNamespace(profile=prof, cards=[Card(index=i, nodes=()) for i in range(4)])
    kind = f"{prof.vendor}/{prof.device_class}"
    opts = spec.SpecOptions(edit=None)  # type: ignore[arg-type]
    return spec.hook_index(view, {"kind": kind}, opts)  # type: ignore[arg-type]


def device_names(index: Dict[str, Any]) -> List[str]:
    return [index["indices"][k] for k in sorted(index["indices"], key=int)] + ([index["all"]] if index.get("all")
                                                                             else [])


def ids(case: Dict[str, Any]) -> str:
    return f"{case['profile']}:{case['value'][:24]}"


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per profile a spec whose Nth device (in the index's order) has one node /dev/vec-N of
    minor N (its host node any character device: /dev/null) and, beside it, the index
    generate writes."""
    d = tmp_path_factory.mktemp("vector-specs")
    for name in sorted({c["profile"] for c in VECTORS}):
        index = index_of(name)
        devices = []
        for minor, dev in enumerate(device_names(index)):
            devices.append({"name": dev, "containerEdits": {"deviceNodes": [
                {"path": f"/dev/vec-{minor}", "hostPath": "/dev/null", "type": "c", "major": MAJOR, "minor": minor}]}})
        (d / f"{name}.json").write_text(json.dumps({"cdiVersion": "0.6.0", "kind": index["kind"], "devices": devices}))
        (d / f"{name}.json.xpu-cdi").write_text(json.dumps(index))
    return d


def base_config(case: Dict[str, Any]) -> Dict[str, Any]:
    return {"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "process": {"env": [f"{case['var']}={case['value']}"]}}


@pytest.mark.parametrize("case", VECTORS, ids=ids)
def test_wrapper(case: Dict[str, Any], spec_dir: Path, tmp_path: Path) -> None:
    """The wrapper writes exactly the wanted cards' nodes, or refuses in one line naming the variable."""
    (tmp_path / "rootfs").mkdir()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(base_config(case)))
    before = config.read_bytes()
    r = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(tmp_path), "c1"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                       env={"PATH": "", "XPU_CDI_RUNTIME": "/bin/true", "XPU_CDI_SPEC_DIRS": str(spec_dir)})
    names = device_names(index_of(case["profile"]))
    if "want" in case:
        assert (r.returncode, r.stderr) == (0, ""), (case, r.stderr)
        got = [names[n["minor"]] for n in json.loads(config.read_text()).get("linux", {}).get("devices", [])
               if n["major"] == MAJOR]
        assert got == case["want"], case
    else:
        assert r.returncode == 1 and r.stderr.startswith(f"xpu-container-runtime: {case['var']}="), (case, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
        for fragment in case["error"]:
            assert fragment in r.stderr, (case, r.stderr)
        assert config.read_bytes() == before


@pytest.mark.parametrize("case", [c for c in VECTORS if "error" in c], ids=ids)
def test_hook_refuses_alike(case: Dict[str, Any], spec_dir: Path, tmp_path: Path) -> None:
    """The hook refuses each bad value in one line with the same fragments, exit 1."""
    (tmp_path / "rootfs").mkdir()
    (tmp_path / "config.json").write_text(json.dumps(base_config(case)))
    state = {"ociVersion": "1.0.2", "id": "c1", "pid": 0, "bundle": str(tmp_path)}
    r = subprocess.run([hook_binary("xpu-cdi-hook"), "prestart"], input=json.dumps(state), capture_output=True,
                       text=True, timeout=30, env={"PATH": "", "XPU_CDI_SPEC_DIRS": str(spec_dir)})
    assert r.returncode == 1 and r.stderr.startswith(f"xpu-cdi-hook: {case['var']}="), (case, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    for fragment in case["error"]:
        assert fragment in r.stderr, (case, r.stderr)
