"""atheris: `xpu-cdi validate` on arbitrary spec files (cdi/validate)."""

from __future__ import annotations

import sys

import atheris
import yaml

import _contract

with atheris.instrument_imports():
    from xpu_cdi.cdi import validate


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    path = _contract.put("spec" + fdp.PickValueInList([".json", ".yaml"]), fdp.ConsumeBytes(8192))
    try:
        spec = validate.load_file(path)
    except (ValueError, RecursionError, yaml.YAMLError):
        return  # the CLI reports these as "cannot parse"
    for line in validate.problems(spec):
        if not isinstance(line, str) or "\n" in line:
            raise AssertionError(f"bad problem line {line!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
