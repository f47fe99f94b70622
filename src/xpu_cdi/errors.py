"""The one exception hierarchy of xpu-cdi.

Every error raised on purpose derives from :class:`XpuCdiError`; the CLI
maps the classes to exit codes in one table (:data:`EXIT_CODES`, here: the daemons'
fresh interpreters use it without click, ``node/fresh.py``).  (The
compiled hook and wrapper word their own errors in the same style.)  Messages follow the
CDI library's style: lowercase, the bad value in quotes, then the reason,
and where possible what to do about it.
"""

from __future__ import annotations

import sys


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


class AllocationError(SelectionError):
    """kubelet asked the device plugin for IDs that cannot be given (unknown, unhealthy)."""


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


class HostSetupError(XpuCdiError):
    """A change to the host itself (the ``/dev/char`` links) cannot be made."""


class InstallError(XpuCdiError):
    """A compiled part of the installation is missing or cannot be loaded."""


class ConfigError(XpuCdiError):
    """A node config file (``/etc/xpu-cdi/config.yaml``) or the device plugin's settings are unusable."""


class ClaimError(SelectionError):
    """A DRA ResourceClaim cannot be prepared on this node (kubelet gets the line in that claim's ``error``)."""


class ApiError(XpuCdiError):
    """A request the API server refused (``status`` >= 400) or that did not reach it (``status`` 0)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


class SourceError(XpuCdiError):
    """A source the exporter reads gave nothing usable (the source then reads as down, with this line)."""


class ToolError(SourceError):
    """A vendor tool could not give its output: one line saying why."""


class PodResourcesError(SourceError):
    """kubelet's PodResources API could not be read."""


# click uses 2 for usage errors; every other XpuCdiError not listed is 1.
EXIT_CODES = {ProfileError: 3, SpecError: 5}


def exit_code(err: XpuCdiError) -> int:
    """The exit code for an error: the first matching class in EXIT_CODES, else 1."""
    for cls, code in EXIT_CODES.items():
        if isinstance(err, cls):
            return code
    return 1


def report(err: XpuCdiError) -> int:
    """*err* as the command line says it, one line on stderr; its exit code."""
    print(f"xpu-cdi: {err}", file=sys.stderr, flush=True)
    return exit_code(err)
