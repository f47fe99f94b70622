"""atheris: selection env values and hook index files (hook/select)."""

from __future__ import annotations

import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.hook import select

VARS = ["CXPU_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "OTHER"]


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    index = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2048))
    env = [f"{fdp.PickValueInList(VARS)}={fdp.ConsumeUnicodeNoSurrogates(64)}" for _ in range(fdp.ConsumeIntInRange(0, 3))]
    annotations = {fdp.ConsumeUnicodeNoSurrogates(24): fdp.ConsumeUnicodeNoSurrogates(64)}
    _contract.clear()
    _contract.put("k.json.xpu-cdi", index)
    indexes = select.load_indexes([_contract.SCRATCH])
    _contract.ours(select.requested, env, annotations, indexes)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
