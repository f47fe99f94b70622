"""The kernel's uevents, read through pyudev's netlink monitor: what ``watch``, the device
plugin and the labeller wake on when a card or a driver module comes or goes."""

from __future__ import annotations

import os
import socket
from typing import Any, Optional, Tuple

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


def receive(monitor: Any, timeout: float) -> Tuple[Any, Optional[str]]:
    """The next uevent within *timeout* seconds (None: none came), and why uevents were lost
    (None: they were not; ``No buffer space available``: the socket overflowed).

    A lost uevent leaves an error pending on the socket, and pyudev's poll fails on it
    without reading it: it is taken here (``SO_ERROR``), else every later poll failed at once.
    """
    try:
        return monitor.poll(timeout=timeout), None
    except OSError as err:
        with socket.fromfd(monitor.fileno(), socket.AF_NETLINK, socket.SOCK_RAW) as sock:
            pending = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        return None, os.strerror(pending) if pending else str(err)
