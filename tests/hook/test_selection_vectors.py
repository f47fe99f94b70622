"""The selection rules of every profile, one table (tests/data/vectors/
selection.json) checked against both implementations that read it: the
Python tooling (hook.select.parse_value) and the compiled binaries' parser
(hotpath/lib/selection.c), black-box through xpu-container-runtime: each
case's variable in a config.json, the devices it picked read back from the
env entries the wrapper wrote.  The hook index each case runs
under is the one `generate` writes for that profile (generate.spec.hook_index),
so the profile data, the index writer and both readers are covered at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

from xpu_cdi.errors import SelectionError
from xpu_cdi.generate import profile, spec
from xpu_cdi.hook import select
from xpu_cdi.model import Card

from hookkit import hook_binary

VECTORS = json.loads((Path(__file__).parent.parent / "data" / "vectors" / "selection.json").read_text())["cases"]
PROFILES = profile.load_all([])


def index_of(name: str) -> Dict[str, Any]:
    """The hook index generate writes for a 4-card host of profile *name*."""
    prof = PROFILES[name]
    view = SimpleNamespace(profile=prof, cards=[Card(index=i, nodes=()) for i in range(4)])
    kind = f"{prof.vendor}/{prof.device_class}"
    opts = spec.SpecOptions(edit=None)  # type: ignore[arg-type]
    return spec.hook_index(view, {"kind": kind}, opts)  # type: ignore[arg-type]


def ids(case: Dict[str, Any]) -> str:
    return f"{case['profile']}:{case['value'][:24]}"


@pytest.mark.parametrize("case", VECTORS, ids=ids)
def test_python(case: Dict[str, Any]) -> None:
    index = index_of(case["profile"])
    if "want" in case:
        assert select.parse_value(case["var"], case["value"], index) == case["want"]
    else:
        with pytest.raises(SelectionError) as err:
            select.parse_value(case["var"], case["value"], index)
        for fragment in case["error"]:
            assert fragment in str(err.value)


def spec_for(index: Dict[str, Any]) -> Dict[str, Any]:
    """A CDI spec defining every device of *index*; each device's only edit is an env entry naming it."""
    names = sorted(set(index["indices"].values()) | ({index["all"]} if index.get("all") else set()))
    return {"cdiVersion": "0.6.0", "kind": index["kind"],
            "devices": [{"name": n, "containerEdits": {"env": [f"PICKED_{n.encode().hex()}={n}"]}} for n in names]}


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One spec and its hook index per profile of the vectors."""
    d = tmp_path_factory.mktemp("vector-specs")
    for name in {c["profile"] for c in VECTORS}:
        index = index_of(name)
        (d / f"{name}.json").write_text(json.dumps(spec_for(index)))
        (d / f"{name}.json.xpu-cdi").write_text(json.dumps(index))
    return d


@pytest.mark.parametrize("case", VECTORS, ids=ids)
def test_compiled(case: Dict[str, Any], spec_dir: Path, tmp_path: Path) -> None:
    """The wrapper picks exactly the wanted devices, in order; an error case is refused in one line, the
    config left as it was."""
    config = tmp_path / "config.json"
    text = json.dumps({"ociVersion": "1.0.2", "process": {"env": [f"{case['var']}={case['value']}"]},
                       "root": {"path": "rootfs"}})
    config.write_text(text)
    out = subprocess.run([hook_binary("xpu-container-runtime"), "create", "--bundle", str(tmp_path), "c1"],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "XPU_CDI_RUNTIME": "/bin/true",
                              "XPU_CDI_SPEC_DIRS": str(spec_dir)})
    if "want" in case:
        assert out.returncode == 0, (case, out.stderr)
        env = json.loads(config.read_text())["process"]["env"]
        assert [e.split("=", 1)[1] for e in env if e.startswith("PICKED_")] == case["want"], (case, env)
    else:
        assert out.returncode == 1 and out.stderr.startswith("xpu-container-runtime: "), (case, out.stderr)
        assert out.stderr.count("\n") == 1, out.stderr
        assert config.read_text() == text
