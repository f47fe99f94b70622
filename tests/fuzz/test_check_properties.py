"""Properties of `generate --check`'s reader (generate/check): any file on disk
gives "up to date", a list of differences, or a one-line SpecError."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from fuzzcontract import FUZZ, file_contents, ours, specs
from hypothesis import example, given
from hypothesis import strategies as st
from test_registry_properties import BILLION_LAUGHS

from xpu_cdi.errors import SpecError
from xpu_cdi.generate import check

FRESH = json.loads((__import__("pathlib").Path(__file__).parents[1] / "data/specs/kunlunxin-8card.json").read_text())


class TestRead:
    @FUZZ
    @given(data=file_contents(specs), ext=st.sampled_from([".json", ".yaml"]))
    @example(data=b'{"devices": 5}', ext=".json")
    @example(data=b'{"devices": [{"name": [1]}], "containerEdits": 3}', ext=".json")
    @example(data=BILLION_LAUGHS, ext=".yaml")
    @example(data=json.dumps(FRESH).encode(), ext=".json")
    def test_any_file(self, data: bytes, ext: str) -> None:
        """read() then differences() never raise anything but SpecError; an identical spec has no differences."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kunlunxin.com-xpu" + ext)
            with open(path, "wb") as f:
                f.write(data)
            old: Any = ours(check.read, path)
            if isinstance(old, SpecError):
                assert path in str(old)
                return
            diffs = ours(check.differences, old, FRESH)
            assert isinstance(diffs, list) and all(isinstance(x, str) and "\n" not in x for x in diffs)
            if old == FRESH:
                assert diffs == []

    def test_missing_file(self, tmp_path: Any) -> None:
        """No file on disk reads as None and differs as 'no spec on disk'."""
        assert check.read(str(tmp_path / "none.json")) is None
        assert check.differences(None, FRESH) == ["no spec on disk"]
