"""atheris: the OCI state on the hook's stdin and the bundle's config.json (hook/state)."""

from __future__ import annotations

import os
import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.hook import state



STATE = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 1, "bundle": "/b"}
CONFIG = {"root": {"path": "rootfs"}, "process": {"env": ["CXPU_VISIBLE_DEVICES=1"]}}


def one_input(data: bytes) -> None:
    """The same bytes as the state on stdin and as config.json, each beside a valid partner."""
    os.makedirs(os.path.join(_contract.SCRATCH, "bundle"), exist_ok=True)
    _contract.put("bundle/config.json", data)
    parsed = _contract.ours(state.parse_state, data)
    config = _contract.ours(state.read_config, os.path.join(_contract.SCRATCH, "bundle"))
    for s, c in ((parsed, CONFIG), (STATE, config)):
        if isinstance(s, dict) and isinstance(c, dict):
            got = _contract.ours(state.container, s, c)
            if isinstance(got, state.Container) and not os.path.isabs(got.rootfs):
                raise AssertionError(f"relative rootfs {got.rootfs!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
