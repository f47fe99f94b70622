"""The one exception hierarchy of xpu-cdi.

Every error raised on purpose derives from :class:`XpuCdiError`; the CLI
maps the classes to exit codes in one table (``clikit.EXIT_CODES``).  (The
compiled hook and wrapper word their own errors in the same style.)  Messages follow the
CDI library's style: lowercase, the bad value in quotes, then the reason,
and where possible what to do about it.
"""

from __future__ import annotations


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
