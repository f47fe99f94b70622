"""atheris: spec directories with arbitrary JSON/YAML files and hook indexes
(cdi/registry load, lookup, merge_edits)."""

from __future__ import annotations

import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.cdi import registry

NAMES = ["a.json", "b.yaml", "a.json.xpu-cdi", "b.yaml.xpu-cdi", "c.json"]


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    _contract.clear()
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        _contract.put(fdp.PickValueInList(NAMES), fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096)))
    reg = registry.load([_contract.SCRATCH])
    for line in reg.problems:
        if "\n" in line:
            raise AssertionError(f"problem spans lines: {line!r}")
    registry.merge_edits(list(reg.devices.values()))
    _contract.ours(reg.lookup, fdp.ConsumeUnicodeNoSurrogates(40))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
