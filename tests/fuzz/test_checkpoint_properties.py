"""Properties of the DRA driver's checkpoint.json (node/checkpoint.py) as the driver loads it and the
exporter reads it (exporter/claimdevices.py): any file gives claims, or an empty checkpoint with
a one-line note; the exporter skips what it cannot read.  Never an exception, never a hang."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from fuzzcontract import FUZZ, file_contents, json_values, mutated, no_hang
from hypothesis import example, given
from hypothesis import strategies as st

from xpu_cdi.node import checkpoint
from xpu_cdi.exporter import claimdevices

DEVICE = {"requests": ["xpus"], "pool": "n1", "device": "3",
          "cdi": ["kunlunxin.com/xpu=3", "k8s.kunlunxin.com/claim=u-3"],
          "shareID": "aaaa", "memory": 1 << 30, "vnpu": {"card": 0, "chip": 0, "template": "vir01", "id": 100}}


@st.composite
def checksummed(draw: Any) -> bytes:
    """A checkpoint whose checksum matches its (maybe mutated) claims: only the shape checks hold it."""
    claims = draw(st.one_of(json_values, mutated({"u": {"namespace": "ns", "name": "c", "devices": [DEVICE]}})))
    doc = {"version": checkpoint.VERSION, "bootId": "b", "claims": claims}
    if isinstance(claims, dict):
        doc["sha256"] = checkpoint._digest(claims)
    return json.dumps(doc).encode()


def load(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as plugins:
        os.mkdir(os.path.join(plugins, "kunlunxin.com"))
        path = os.path.join(plugins, "kunlunxin.com", checkpoint.NAME)
        with open(path, "wb") as f:
            f.write(data)
        with no_hang():
            got, note, corrupt = checkpoint.load(path, "b")
            if corrupt:
                assert note and "\n" not in note and len(note) < 1000, note
            else:  # what the driver then uses must hold
                got.devices_in_use()
                got.vnpu_ids()
            claimdevices.read(plugins, "b")


class TestFiles:
    @FUZZ
    @given(data=st.one_of(file_contents(), checksummed()))
    @example(data=b'{"claims": ' + b"[" * 1000 + b"]" * 1000 + b"}")
    def test_any_file(self, data: bytes) -> None:
        load(data)
