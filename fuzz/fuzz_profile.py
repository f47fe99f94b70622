"""atheris: vendor profile files an admin drops in /etc/xpu-cdi/profiles.d (generate/profile)."""

from __future__ import annotations

import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.generate import profile


def one_input(data: bytes) -> None:
    _contract.ours(profile.load_file, _contract.put("site.yaml", data))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
