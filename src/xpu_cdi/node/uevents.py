"""The kernel's uevents, read through pyudev's netlink monitor: what ``watch``, the device
plugin and the labeller wake on when a card or a driver module comes or goes."""

from __future__ import annotations

import os
from typing import Any

from ..log import WARNING, Log

#: ``auto``: udev's (after its rules ran) where udevd runs, else the kernel's; ``none``: no monitor
SOURCES = ("auto", "udev", "kernel", "none")


def open_source(kind: str, log: Log) -> Any:
    """A started pyudev monitor: ``udev`` (after rules ran) when udevd runs, else ``kernel``.

    Returns None (files only) for ``none`` or when netlink is not available
    here (a pod without ``hostNetwork``, say), after logging why.
    """
    if kind == "none":
        return None
    if kind == "auto":
        kind = "udev" if os.path.exists("/run/udev/control") else "kernel"
    try:
        import pyudev

        monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source=kind)
        monitor.start()
    except (OSError, ImportError, ValueError) as err:
        log(f"cannot listen to {kind} uevents ({err}): watching files only", WARNING)
        return None
    return monitor

