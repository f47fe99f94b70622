"""atheris: qualified CDI device names and cdi.k8s.io annotations (cdi/names)."""

from __future__ import annotations

import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.cdi import names


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    key = fdp.ConsumeUnicodeNoSurrogates(80)
    value = fdp.ConsumeUnicodeNoSurrogates(256)
    got = _contract.ours(names.parse_qualified, value)
    if isinstance(got, tuple) and names.qualified(*got) != value:
        raise AssertionError(f"{value!r} does not round-trip")
    if isinstance(got, tuple) and ("\n" in value or not value.isascii()):
        raise AssertionError(f"{value!r} accepted but the reference rules refuse it")
    _contract.ours(names.devices_from_annotations, {key: value, "cdi.k8s.io/" + key: value})


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
