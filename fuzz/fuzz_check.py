"""atheris: the on-disk spec `generate --check` compares (generate/check)."""

from __future__ import annotations

import json
import os
import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.generate import check

FRESH = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "specs",
                                    "kunlunxin-8card.json")))


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    path = _contract.put("spec" + fdp.PickValueInList([".json", ".yaml"]), fdp.ConsumeBytes(8192))
    old = _contract.ours(check.read, path)
    if isinstance(old, dict) or old is None:
        for line in check.differences(old, FRESH):
            if "\n" in line:
                raise AssertionError(f"difference spans lines: {line!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
