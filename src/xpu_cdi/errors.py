"""The one exception hierarchy of xpu-cdi.

Every error raised on purpose derives from :class:`XpuCdiError`; the CLI
maps the classes to exit codes in one table (``clikit.EXIT_CODES``) and the
hook prints ``xpu-cdi-hook: <message>`` and exits 1.  Messages follow the
CDI library's style: lowercase, the bad value in quotes, then the reason,
and where possible what to do about it.
"""

from __future__ import annotations

import os


class XpuCdiError(Exception):
    """Base of all xpu-cdi errors.  Never raised directly."""


class ProfileError(XpuCdiError):
    """A vendor profile is unknown, unreadable or violates the schema."""


class DiscoveryError(XpuCdiError):
    """The host does not have what a profile needs (no cards, no control node)."""


class SpecError(XpuCdiError):
    """A CDI spec is invalid, cannot be read or cannot be written."""


class SelectionError(XpuCdiError):
    """A container asked for devices in a way we cannot honour."""


class HookError(XpuCdiError):
    """The OCI state or config.json is unusable, or injection failed."""


class RuntimeConfigError(XpuCdiError):
    """A container-runtime configuration file cannot be read or changed.

    ``path`` and ``reason`` are the file and the bare cause (no advice), set
    where a file cannot be read or parsed: ``doctor`` words its own message
    from them, where ``runtime configure`` prints the whole one.
    """

    def __init__(self, message: str, path: str = "", reason: str = "") -> None:
        self.path = path
        self.reason = reason or message
        super().__init__(message)


class SyscallError(XpuCdiError):
    """A system call failed.  ``str()`` names the call, the target and the errno."""

    def __init__(self, call: str, errno: int, target: str) -> None:
        self.call = call
        self.errno = errno
        self.target = target
        super().__init__(f"{call} {target!r}: {os.strerror(errno)} (errno {errno})")


class ConfigError(XpuCdiError):
    """A node config file (``/etc/xpu-cdi/config.yaml``) or the device plugin's settings are unusable."""
