"""hook.jsonload.loads gives exactly what json.loads gives (values and
error class) without importing json on the success path."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from xpu_cdi.hook import jsonload

values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                      lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                                          max_size=4),
                      max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=values, indent=st.sampled_from([None, 1]), pad=st.sampled_from(["", " ", "\n\t "]))
def test_same_values(value: object, indent: object, pad: str) -> None:
    """Any JSON document, compact or indented, padded with whitespace, as str or bytes."""
    text = pad + json.dumps(value, indent=indent) + pad  # type: ignore[arg-type]
    assert jsonload.loads(text) == json.loads(text)
    assert jsonload.loads(text.encode()) == json.loads(text.encode())


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='{}[]":,0123456789.eE+-tfnrulsa \\/\n', max_size=30))
def test_same_errors(text: str) -> None:
    """Arbitrary JSON-ish text: same value, or a ValueError where json raises one."""
    try:
        want = json.loads(text)
    except ValueError:
        try:
            jsonload.loads(text)
        except ValueError:
            return
        raise AssertionError(f"jsonload accepted {text!r}")
    got = jsonload.loads(text)
    assert got == want or (isinstance(got, float) and math.isnan(got))


def test_constants_and_duplicates() -> None:
    """NaN/Infinity as json accepts them; the last duplicate key wins."""
    assert math.isinf(jsonload.loads("Infinity"))  # type: ignore[arg-type]
    assert jsonload.loads('{"a": 1, "a": 2}') == {"a": 2}


def test_no_json_import_on_success() -> None:
    """Parsing valid input imports neither json nor re."""
    src = os.path.dirname(os.path.dirname(os.path.abspath(jsonload.__file__ or "")))
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(src)!r}); from xpu_cdi.hook import jsonload; "
            "jsonload.loads(b'{\"a\": [1, 2.5, null]}'); "
            "print(sorted(m for m in ('json', 're', 'json.decoder') if m in sys.modules))")
    # -I -S as the launcher runs it: site.py itself would import re
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
