"""The selection rules of every profile, one table (tests/data/vectors/
selection.json) checked against both implementations that read it: the
Python tooling (hook.select.parse_value) and the compiled binaries' parser
(select.c, through the build's test binary).  The hook index each case runs
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


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("vector-indexes")
    for name in {c["profile"] for c in VECTORS}:
        (d / f"{name}.json.xpu-cdi").write_text(json.dumps(index_of(name)))
    return d


def test_compiled(index_dir: Path) -> None:
    """The C parser selects exactly the wanted names, and answers no error case with devices."""
    exe = hook_binary("xpu-cdi-fast-test")
    lines = "".join(json.dumps({"env": [f"{c['var']}={c['value']}"], "annState": None, "annConfig": None}) + "\n"
                    for c in VECTORS)
    out = subprocess.run([exe, "request", "requested", str(index_dir)], input=lines.encode(), capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    answers: List[str] = out.stdout.decode().splitlines()
    assert len(answers) == len(VECTORS)
    for case, got in zip(VECTORS, answers):
        kind = index_of(case["profile"])["kind"]
        if "want" in case:
            assert json.loads(got) == [f"{kind}={n}" for n in case["want"]], (case, got)
        else:  # refused (the binary's reason is checked against the Python wording once it words it)
            assert got.startswith("DEFER "), (case, got)
