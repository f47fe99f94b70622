"""The kernel's uevents, read through libudev's netlink monitor: what ``watch``, the device
plugin and the labeller wake on when a card or a driver module comes or goes.

libudev (``libudev.so.1``, a stable C API) is called through ctypes, as :mod:`.inotify` calls
libc: the dozen calls a monitor needs.  pyudev did the same with 35 modules of its own and, by
``ctypes.util``, tempfile, shutil, bz2 and lzma: 1.0-1.5 MiB of every node daemon (issue 30).
udev's messages are parsed by libudev only: their wire format is libudev's own, not an API.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..log import WARNING, Log

#: ``auto``: udev's (after its rules ran) where udevd runs, else the kernel's; ``none``: no monitor
SOURCES = ("auto", "udev", "kernel", "none")
LIBUDEV = "libudev.so.1"

_P = ctypes.c_void_p
# name -> (result, arguments)
_CALLS = {
    "udev_new": (_P, ()), "udev_unref": (_P, (_P,)),
    "udev_monitor_new_from_netlink": (_P, (_P, ctypes.c_char_p)),
    "udev_monitor_enable_receiving": (ctypes.c_int, (_P,)),
    "udev_monitor_set_receive_buffer_size": (ctypes.c_int, (_P, ctypes.c_int)),
    "udev_monitor_get_fd": (ctypes.c_int, (_P,)),
    "udev_monitor_receive_device": (_P, (_P,)), "udev_monitor_unref": (_P, (_P,)),
    "udev_device_get_action": (ctypes.c_char_p, (_P,)),
    "udev_device_get_properties_list_entry": (_P, (_P,)), "udev_device_unref": (_P, (_P,)),
    "udev_list_entry_get_next": (_P, (_P,)),
    "udev_list_entry_get_name": (ctypes.c_char_p, (_P,)), "udev_list_entry_get_value": (ctypes.c_char_p, (_P,)),
}


@dataclass
class Uevent:
    """One uevent: its action and its properties (``ACTION``, ``SUBSYSTEM``, ``DEVNAME``, ``DRIVER`` ...)."""

    action: Optional[str]
    properties: Dict[str, str] = field(default_factory=dict)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno() or errno.EIO
    return OSError(code, f"{what}: {os.strerror(code)}")


class Monitor:
    """A receiving libudev monitor of *source* (``udev`` or ``kernel``); select()-able."""

    def __init__(self, source: str) -> None:
        lib = ctypes.CDLL(LIBUDEV, use_errno=True)
        for name, (res, args) in _CALLS.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, list(args)
        self.lib, self.udev, self.mon = lib, lib.udev_new(), None
        if not self.udev:
            raise _fail("udev_new")
        self.mon = lib.udev_monitor_new_from_netlink(self.udev, source.encode())
        if not self.mon:
            self.close()
            raise _fail(f"a {source} netlink monitor")
        if lib.udev_monitor_enable_receiving(self.mon) < 0:
            self.close()
            raise _fail("receiving uevents")
        self.fd = lib.udev_monitor_get_fd(self.mon)

    def fileno(self) -> int:
        return self.fd

    def set_receive_buffer_size(self, size: int) -> None:
        if self.lib.udev_monitor_set_receive_buffer_size(self.mon, size) < 0:
            raise _fail("setting the receive buffer")

    def poll(self, timeout: Optional[float] = None) -> Optional[Uevent]:
        """The next uevent within *timeout* seconds, or None.

        Raises:
            OSError: the socket failed, ENOBUFS when uevents were lost (the error is taken with it).
        """
        if not select.select([self.fd], [], [], timeout)[0]:
            return None
        ctypes.set_errno(0)
        dev = self.lib.udev_monitor_receive_device(self.mon)
        if not dev:
            code = ctypes.get_errno()
            if code in (0, errno.EAGAIN, errno.EINTR):  # a message libudev dropped (not from root, filtered)
                return None
            raise OSError(code, os.strerror(code))
        try:
            action = self.lib.udev_device_get_action(dev)
            props: Dict[str, str] = {}
            entry = self.lib.udev_device_get_properties_list_entry(dev)
            while entry:
                name, value = self.lib.udev_list_entry_get_name(entry), self.lib.udev_list_entry_get_value(entry)
                if name:
                    props[name.decode(errors="replace")] = (value or b"").decode(errors="replace")
                entry = self.lib.udev_list_entry_get_next(entry)
        finally:
            self.lib.udev_device_unref(dev)
        return Uevent(action.decode(errors="replace") if action else None, props)

    def close(self) -> None:
        if self.mon:
            self.lib.udev_monitor_unref(self.mon)
            self.mon = None
        if self.udev:
            self.lib.udev_unref(self.udev)
            self.udev = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone
            pass


def open_source(kind: str, log: Log) -> Optional[Monitor]:
    """A receiving monitor: ``udev`` (after rules ran) when udevd runs, else ``kernel``.

    Returns None (files only) for ``none`` or when netlink or libudev is not available
    here (a pod without ``hostNetwork``, say), after logging why.
    """
    if kind == "none":
        return None
    if kind == "auto":
        kind = "udev" if os.path.exists("/run/udev/control") else "kernel"
    try:
        return Monitor(kind)
    except OSError as err:
        log(f"cannot listen to {kind} uevents ({err}): watching files only", WARNING)
        return None


def receive(monitor: Any, timeout: float) -> Tuple[Any, Optional[str]]:
    """The next uevent within *timeout* seconds (None: none came), and why uevents were lost
    (None: they were not; ``No buffer space available``: the socket overflowed).

    A lost uevent leaves an error pending on the socket; reading it takes the error, so the
    next wait does not wake on it again.
    """
    try:
        return monitor.poll(timeout=timeout), None
    except OSError as err:
        return None, err.strerror or str(err)
