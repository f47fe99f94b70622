"""Properties of `xpu-cdi validate` (cdi/validate): any document gives a list of
one-line problems, never an exception; any file parses or fails as JSON/YAML."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import yaml
from fuzzcontract import FUZZ, file_contents, json_values, no_hang, ours, specs
from hypothesis import example, given
from hypothesis import strategies as st
from test_registry_properties import BILLION_LAUGHS

from xpu_cdi.cdi import validate

GOOD = {"cdiVersion": "0.5.0", "kind": "kunlunxin.com/xpu",
        "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/xpu0", "hostPath": "/dev/xpu0"}]}}]}


class TestProblems:
    @FUZZ
    @given(spec=st.one_of(specs, json_values))
    @example(spec=GOOD)
    @example(spec=json.loads("[" * 400 + "]" * 400))
    @example(spec=dict(GOOD, devices=[{"name": "0", "containerEdits": {"env": json.loads("[" * 400 + "]" * 400)}}]))
    @example(spec=dict(GOOD, devices=5))
    @example(spec=dict(GOOD, kind="kunlunxin.com/xpu\n"))
    def test_any_document(self, spec: Any) -> None:
        """problems() returns one-line strings for any document; the known-good one has none."""
        got = ours(validate.problems, spec)
        assert isinstance(got, list) and all(isinstance(p, str) and p and "\n" not in p for p in got)
        if spec is GOOD:
            assert got == []
        if isinstance(spec, dict) and spec.get("kind") == "kunlunxin.com/xpu\n":
            assert got


class TestLoadFile:
    @FUZZ
    @given(data=file_contents(specs), ext=st.sampled_from([".json", ".yaml"]))
    @example(data=BILLION_LAUGHS, ext=".yaml")
    @example(data=b"&a [*a]", ext=".yaml")
    def test_any_file(self, data: bytes, ext: str) -> None:
        """A spec file parses, or fails with a parse error the CLI turns into one line; then validates in
        bounded time."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "spec" + ext)
            with open(path, "wb") as f:
                f.write(data)
            with no_hang():
                try:
                    spec = validate.load_file(path)
                except (ValueError, yaml.YAMLError, RecursionError):
                    return  # what `xpu-cdi validate` reports as "cannot parse"
            ours(validate.problems, spec)
