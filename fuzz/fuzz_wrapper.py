"""atheris: config.json as the wrapper runtime edits it (runtime/wrapper.prepare, runtime/ociedit)."""

from __future__ import annotations

import json
import os
import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.runtime import wrapper

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SPECS = os.path.join(_contract.SCRATCH, "cdi")
BUNDLE = os.path.join(_contract.SCRATCH, "bundle")
ENV = {"XPU_CDI_SPEC_DIRS": SPECS, "PATH": "/usr/bin:/bin"}


def setup() -> None:
    os.makedirs(SPECS, exist_ok=True)
    os.makedirs(BUNDLE, exist_ok=True)
    with open(os.path.join(REPO, "tests", "data", "specs", "kunlunxin-8card.json")) as f:
        spec = f.read().replace("@ROOT@", "")
    with open(os.path.join(SPECS, "kunlunxin.com-xpu.json"), "w") as f:
        f.write(spec)
    with open(os.path.join(SPECS, "kunlunxin.com-xpu.json.xpu-cdi"), "w") as f:
        json.dump({"xpuCdiIndex": 1, "kind": "kunlunxin.com/xpu",
                   "selection": {"env": ["CXPU_VISIBLE_DEVICES"], "aliases": None, "none": ["", "void"]},
                   "indices": {str(i): str(i) for i in range(8)}, "all": "all"}, f)


def one_input(data: bytes) -> None:
    path = os.path.join(BUNDLE, "config.json")
    with open(path, "wb") as f:
        f.write(data)
    got = _contract.ours(wrapper.prepare, BUNDLE, ENV)
    if isinstance(got, list) and got:
        with open(path, "rb") as f:
            json.loads(f.read())  # what runc will parse next


if __name__ == "__main__":
    setup()
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
