"""atheris: the settings files an admin edits (the node config /etc/xpu-cdi/config.yaml and the
device plugin's config, nodeconfig.py and deviceplugin/config.py), read as on start and on SIGHUP."""

from __future__ import annotations

import sys

import atheris

import _contract

with atheris.instrument_imports():
    from xpu_cdi import nodeconfig
    from xpu_cdi.deviceplugin import config


def one_input(data: bytes) -> None:
    path = _contract.put("config.yaml", data)
    _contract.ours(nodeconfig.read, path)
    _contract.ours(config.build, path, {})


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
