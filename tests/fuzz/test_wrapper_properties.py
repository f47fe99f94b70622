"""Properties of the wrapper runtime's config.json handling (runtime/wrapper,
runtime/ociedit): any config.json asking for cards is edited into one runc can
read, or refused with a one-line XpuCdiError; it is never left half-written."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
from fuzzcontract import DEEP, FUZZ, file_contents, json_values, mutated, ours
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.errors import XpuCdiError
from xpu_cdi.runtime import wrapper

SPEC = (Path(__file__).parents[1] / "data" / "specs" / "kunlunxin-8card.json").read_text().replace("@ROOT@", "")
INDEX = {"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu", "profile": "kunlunxin",
         "selection": {"env": ["CXPU_VISIBLE_DEVICES"], "aliases": None, "none": ["", "void", "none"]},
         "indices": {str(i): str(i) for i in range(8)}, "all": "all", "spec": "kunlunxin.com-xpu.json"}
CONFIG = {"ociVersion": "1.0.2", "root": {"path": "rootfs"},
          "process": {"env": ["PATH=/bin", "CXPU_VISIBLE_DEVICES=1,3"], "args": ["true"]},
          "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
          "annotations": {}, "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
configs = st.one_of(st.just(CONFIG).flatmap(mutated), json_values)


@pytest.fixture(scope="module")
def spec_env() -> Iterator[Dict[str, str]]:
    """A spec dir with the 8-card golden spec and its hook index; the wrapper's own env."""
    with tempfile.TemporaryDirectory() as d:
        Path(d, "kunlunxin.com-xpu.json").write_text(SPEC)
        Path(d, "kunlunxin.com-xpu.json.xpu-cdi").write_text(json.dumps(INDEX))
        yield {"XPU_CDI_SPEC_DIRS": d, "PATH": "/usr/bin:/bin"}


def prepare(env: Dict[str, str], data: bytes) -> Any:
    """Run prepare() on a bundle whose config.json holds *data*; return (result, bytes after)."""
    with tempfile.TemporaryDirectory() as bundle:
        path = os.path.join(bundle, "config.json")
        with open(path, "wb") as f:
            f.write(data)
        got = ours(wrapper.prepare, bundle, env)
        with open(path, "rb") as f:
            after = f.read()
        assert sorted(os.listdir(bundle)) == ["config.json"], "a temp file was left in the bundle"
        return got, after


class TestPrepare:
    @FUZZ
    @given(config=configs)
    @example(config=CONFIG)
    @example(config=dict(CONFIG, mounts=[{"destination": 5}]))
    @example(config=dict(CONFIG, linux={"devices": "x", "resources": 7}))
    @example(config=dict(CONFIG, process={"env": ["CXPU_VISIBLE_DEVICES=9"]}))
    def test_any_config(self, spec_env: Dict[str, str], config: Any) -> None:
        """An edited config.json is valid JSON with the requested nodes and allow rules; a refused one is unchanged."""
        data = json.dumps(config).encode()
        got, after = prepare(spec_env, data)
        if isinstance(got, XpuCdiError) or got == []:
            assert after == data, "config.json changed although nothing was applied"
            return
        edited = json.loads(after)
        paths = {d.get("path") for d in edited["linux"]["devices"] if isinstance(d, dict)}
        for q in got:
            assert f"/dev/xpu{q.rpartition('=')[2]}" in paths or q.endswith("=all")
        assert "/dev/xpuctrl" in paths

    @FUZZ
    @given(data=file_contents(deep=False))
    def test_any_bytes(self, spec_env: Dict[str, str], data: bytes) -> None:
        """Any bytes in config.json: applied, nothing asked, or a one-line error; never a traceback."""
        prepare(spec_env, data)

    def test_deep_nesting(self, spec_env: Dict[str, str]) -> None:
        """A deeply nested config.json that asks for a card is refused with our error, like any invalid JSON."""
        data = b'{"process":{"env":["CXPU_VISIBLE_DEVICES=1"]},"x":' + DEEP[0]
        assert isinstance(prepare(spec_env, data)[0], XpuCdiError)

    def test_mount_destination_not_a_string(self, spec_env: Dict[str, str]) -> None:
        """A config.json mount with a numeric destination is refused with our error (runc would refuse it too)."""
        config = dict(CONFIG, mounts=[{"destination": 5}])
        assert isinstance(prepare(spec_env, json.dumps(config).encode())[0], XpuCdiError)
