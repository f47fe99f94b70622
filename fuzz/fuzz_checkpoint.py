"""atheris: the DRA driver's checkpoint.json as the driver loads it on start and as the exporter reads
every driver's under kubelet's plugins dir (node/checkpoint.py, exporter/claimdevices.py): never an
exception, the driver gets an empty checkpoint and a one-line note."""

from __future__ import annotations

import os
import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi.node import checkpoint
    from xpu_cdi.exporter import claimdevices

PLUGINS = os.path.join(_contract.SCRATCH, "plugins")
DRIVER = os.path.join(PLUGINS, "kunlunxin.com")
os.makedirs(DRIVER, exist_ok=True)


def one_input(data: bytes) -> None:
    path = os.path.join(DRIVER, checkpoint.NAME)
    with open(path, "wb") as f:
        f.write(data)
    got, note, corrupt = checkpoint.load(path, "boot-1")
    if corrupt and (not note or "\n" in note):
        raise AssertionError(f"a corrupt checkpoint's note is empty or spans lines: {note!r}")
    claimdevices.read(PLUGINS, "boot-1")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
