"""runtime/jsondump.py writes exactly what json.dumps writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpu_cdi.runtime import jsondump
from xpu_cdi.runtime.ociedit import apply

CONFIG = {"ociVersion": "1.0.2", "process": {"terminal": False, "user": {"uid": 0, "gid": 0},
                                             "args": ["sh", "-c", "echo \"ü\\n\" \u2028 </script>"],
                                             "env": ["PATH=/bin"], "oomScoreAdj": -999},
          "linux": {"resources": {"cpu": {"shares": 1024, "quota": -1, "period": 100000},
                                  "memory": {"swappiness": 0.5}, "devices": []}},
          "annotations": {}, "hooks": None, "empty": [], "nested": [[[]], {}]}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30)


@given(json_values)
def test_same_as_json_dumps(value: Any) -> None:
    """Any JSON value: byte for byte what json.dumps(separators=(',', ':')) gives."""
    assert jsondump.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_edited_config() -> None:
    """A realistic edited config.json round-trips."""
    apply(CONFIG, {"deviceNodes": [{"path": "/dev/xpu0", "type": "c", "major": 240, "minor": 0, "fileMode": 438}]})
    assert json.loads(jsondump.dumps(CONFIG)) == CONFIG


@pytest.mark.parametrize("bad, error", [(float("nan"), ValueError), ({1: 2}, TypeError), ({"a": {1, 2}}, TypeError)])
def test_refuses_what_json_cannot_hold(bad: Any, error: type) -> None:
    """NaN, non-string keys and sets are errors, not silently wrong JSON."""
    with pytest.raises(error):
        jsondump.dumps(bad)
